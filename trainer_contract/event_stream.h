// The two message streams of the worker <-> trainer contract (docs/worker-trainer-contract.md),
// both protobuf's delimited framing (a varint length, then the message):
//
//   trainer --xmod.v1.TrainerEvent (--events_fd, a pipe)----------------------> worker
//   trainer <--xmod.v1.TrainerControl (--lease_fd, one message per packet)---- worker
//
// EventWriter is the trainer's side of the event stream (xmod-train and the fake trainers),
// EventReader and ParseEvents the worker's and the tests'. DelimitedBytes frames one message,
// for the control stream. LibTorch-free; each object is thread-compatible.
#ifndef XMOD_TRAINER_CONTRACT_EVENT_STREAM_H_
#define XMOD_TRAINER_CONTRACT_EVENT_STREAM_H_

#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/message_lite.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "xmod/v1/trainer.pb.h"

namespace xmod {

// `message` as its varint length followed by its bytes.
std::string DelimitedBytes(const google::protobuf::MessageLite& message);

// Writes events to a file descriptor, each handed to it whole with write(2) as soon as it is
// made, so a reader never sees a message split across two writes. Without an fd (fd < 0)
// Write does nothing: the trainer's log lines on stderr are then the only output.
class EventWriter {
 public:
  // Does not own `fd`; fd < 0 disables the stream.
  explicit EventWriter(int fd) : fd_(fd) {}

  // Writes one event. INTERNAL if the fd refuses it (e.g. the worker closed the pipe).
  absl::Status Write(const xmod::v1::TrainerEvent& event);

  // Shorthand for a metric point.
  absl::Status Metric(int64_t step, int64_t tokens, double flops, const std::string& name,
                      double value);

  bool enabled() const { return fd_ >= 0; }

 private:
  int fd_;
};

// Reads events from a file descriptor as they arrive (blocking).
class EventReader {
 public:
  // Does not own `fd`.
  explicit EventReader(int fd) : stream_(fd) {}

  // true: `event` holds the next event (and nothing of an earlier one); false: the stream ended
  // cleanly (end of file between messages). DATA_LOSS when it ends inside a message or holds
  // something that is not a TrainerEvent; the stream is over after that, and every later call
  // returns false.
  absl::StatusOr<bool> Next(xmod::v1::TrainerEvent* event);

 private:
  google::protobuf::io::FileInputStream stream_;
  bool done_ = false;
};

// Parses a whole stream (e.g. a file the trainer wrote). DATA_LOSS on a truncated or malformed
// message.
absl::StatusOr<std::vector<xmod::v1::TrainerEvent>> ParseEvents(const std::string& bytes);

}  // namespace xmod

#endif  // XMOD_TRAINER_CONTRACT_EVENT_STREAM_H_
