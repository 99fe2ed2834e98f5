// EventWriter: the trainer's side of the process contract with the worker — size-delimited
// xmod.v1.TrainerEvent messages (varint length + message, protobuf's delimited framing) on
// a file descriptor, each handed to the fd with write(2) as soon as it is made. Without an
// fd (fd < 0) Write does nothing: the trainer's glog lines on stderr are then the only
// log. Thread-compatible.
#ifndef XMOD_MODEL_TRAIN_EVENTS_H_
#define XMOD_MODEL_TRAIN_EVENTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "xmod/v1/trainer.pb.h"

namespace xmod {

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

// Parses a whole delimited stream (e.g. a file the trainer wrote). DATA_LOSS on a truncated
// or malformed message.
absl::StatusOr<std::vector<xmod::v1::TrainerEvent>> ParseEvents(const std::string& bytes);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_EVENTS_H_
