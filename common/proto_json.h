// The one JSON shape of the project's API (docs/architecture.md, "API shape"): protobuf's
// JSON mapping of the xmod.v1 messages with proto field names ("sweep_id", not "sweepId")
// and every field printed, defaults included — the same options as the Python client's
// MessageToDict(preserving_proto_field_name=True, including_default_value_fields=True).
// xmodctl -o json, the HTTP /api/, xmod-fit --output json, xmod-eval and the fits stored by
// the coordinator all print through here. Pure functions; thread-safe.
#ifndef XMOD_COMMON_PROTO_JSON_H_
#define XMOD_COMMON_PROTO_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace xmod {

enum class JsonLayout {
  kIndented,  // two-space indentation, ending with a newline: for people (xmodctl -o json)
  kLine,      // one line without a newline: JSON lines (sweep watch), HTTP bodies, columns
};

// The message as JSON. INTERNAL when protobuf cannot print it (an Any of an unknown type;
// never for xmod.v1 messages).
absl::StatusOr<std::string> ProtoJson(const google::protobuf::Message& message,
                                      JsonLayout layout = JsonLayout::kIndented);

}  // namespace xmod

#endif  // XMOD_COMMON_PROTO_JSON_H_
