// Delimited TrainerEvent and TrainerControl streams.
#include "trainer_contract/event_stream.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace xmod {

std::string DelimitedBytes(const google::protobuf::MessageLite& message) {
  std::string bytes;
  {
    // The stream trims `bytes` to what it wrote when it goes out of scope.
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::util::SerializeDelimitedToZeroCopyStream(message, &stream);
  }
  return bytes;
}

absl::Status EventWriter::Write(const xmod::v1::TrainerEvent& event) {
  if (fd_ < 0) return absl::OkStatus();
  // Serialized to a buffer first and written whole, so a message is never split by a
  // buffered stream across two writes the reader could see apart.
  const std::string buffer = DelimitedBytes(event);
  size_t written = 0;
  while (written < buffer.size()) {
    ssize_t n = ::write(fd_, buffer.data() + written, buffer.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(
          absl::StrCat("writing trainer events to fd ", fd_, ": ", std::strerror(errno)));
    }
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status EventWriter::Metric(int64_t step, int64_t tokens, double flops,
                                 const std::string& name, double value) {
  xmod::v1::TrainerEvent event;
  xmod::v1::MetricPoint* point = event.mutable_metric();
  point->set_step(step);
  point->set_tokens(tokens);
  point->set_flops(flops);
  point->set_name(name);
  point->set_value(value);
  return Write(event);
}

absl::StatusOr<bool> EventReader::Next(xmod::v1::TrainerEvent* event) {
  if (done_) return false;
  event->Clear();  // the delimited parser merges into the message it is given
  bool clean_eof = false;
  if (google::protobuf::util::ParseDelimitedFromZeroCopyStream(event, &stream_, &clean_eof)) {
    return true;
  }
  done_ = true;
  if (clean_eof) return false;
  return absl::DataLossError("malformed or truncated event stream");
}

absl::StatusOr<std::vector<xmod::v1::TrainerEvent>> ParseEvents(const std::string& bytes) {
  google::protobuf::io::ArrayInputStream stream(bytes.data(), static_cast<int>(bytes.size()));
  std::vector<xmod::v1::TrainerEvent> events;
  while (true) {
    xmod::v1::TrainerEvent event;
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&event, &stream, &clean_eof)) {
      if (clean_eof) return events;
      return absl::DataLossError(
          absl::StrCat("malformed trainer event after ", events.size(), " events"));
    }
    events.push_back(std::move(event));
  }
}

}  // namespace xmod
