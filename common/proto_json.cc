// The project's JSON printer (see proto_json.h).
#include "common/proto_json.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace xmod {

absl::StatusOr<std::string> ProtoJson(const google::protobuf::Message& message, JsonLayout layout) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = layout == JsonLayout::kIndented;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat(message.GetTypeName(), " as JSON: ", status.ToString()));
  }
  if (layout == JsonLayout::kIndented && (json.empty() || json.back() != '\n')) json += '\n';
  while (layout == JsonLayout::kLine && !json.empty() && json.back() == '\n') json.pop_back();
  return json;
}

}  // namespace xmod
