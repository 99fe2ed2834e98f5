// Size-delimited TrainerEvent stream.
#include "model/train/events.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace xmod {

absl::Status EventWriter::Write(const xmod::v1::TrainerEvent& event) {
  if (fd_ < 0) return absl::OkStatus();
  // Serialize to a buffer first and write it whole, so a message is never split by a
  // buffered stream across two writes the reader could see apart.
  std::string buffer;
  {
    google::protobuf::io::StringOutputStream stream(&buffer);
    if (!google::protobuf::util::SerializeDelimitedToZeroCopyStream(event, &stream)) {
      return absl::InternalError("cannot serialize a trainer event");
    }
  }
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
