// Field paths of invalid requests: an INVALID_ARGUMENT status names the field it refuses
// ("grids[0].ks[2]: K must be >= 1, got 0") both in its message, which is what a client
// sees, and as a payload under kFieldPathUrl, which is what code composing errors reads, so
// that a module nesting another's field under its own ("ks[2]" under "grids[0].") rewrites
// the path without parsing it back out of the message text.
#ifndef XMOD_COMMON_FIELD_PATH_H_
#define XMOD_COMMON_FIELD_PATH_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace xmod {

// The type URL of the field-path payload.
inline constexpr absl::string_view kFieldPathUrl = "type.xmod/field_path";

// INVALID_ARGUMENT with message "<path>: <message>" and `path` as its field-path payload.
absl::Status InvalidField(absl::string_view path, absl::string_view message);

// The field path `status` carries, if any.
std::optional<std::string> FieldPathOf(const absl::Status& status);

// `status` with `prefix` put in front of its field path, in the payload and in the message:
// Reroot(InvalidField("ks[2]", "..."), "grids[0].") is InvalidField("grids[0].ks[2]", "...").
// A status without a field path (OK included) is returned unchanged.
absl::Status Reroot(const absl::Status& status, absl::string_view prefix);

// `status` with its field path replaced by `path` ("k" of a ModelSpec becomes the grid entry
// "grids[0].ks[1]" that set it): the message's "<old path>: " becomes "<path>: ". A status
// without a field path is returned unchanged.
absl::Status WithFieldPath(const absl::Status& status, absl::string_view path);

}  // namespace xmod

#endif  // XMOD_COMMON_FIELD_PATH_H_
