// See field_path.h. The message keeps the path as its first "<path>: " so that it reads as
// it did before paths were payloads; Reroot and WithFieldPath rewrite exactly that prefix.
#include "common/field_path.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace xmod {
namespace {

absl::Status WithPathAndMessage(const absl::Status& status, absl::string_view path,
                                absl::string_view message) {
  absl::Status out(status.code(), message);
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  out.SetPayload(kFieldPathUrl, absl::Cord(path));
  return out;
}

}  // namespace

absl::Status InvalidField(absl::string_view path, absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
  status.SetPayload(kFieldPathUrl, absl::Cord(path));
  return status;
}

std::optional<std::string> FieldPathOf(const absl::Status& status) {
  const auto path = status.GetPayload(kFieldPathUrl);  // absl::optional<absl::Cord>
  if (!path) return std::nullopt;
  return std::string(*path);
}

absl::Status Reroot(const absl::Status& status, absl::string_view prefix) {
  std::optional<std::string> path = FieldPathOf(status);
  if (!path) return status;
  return WithFieldPath(status, absl::StrCat(prefix, *path));
}

absl::Status WithFieldPath(const absl::Status& status, absl::string_view path) {
  std::optional<std::string> old = FieldPathOf(status);
  if (!old) return status;
  absl::string_view rest = status.message();
  if (!absl::ConsumePrefix(&rest, absl::StrCat(*old, ": "))) return status;
  return WithPathAndMessage(status, path, absl::StrCat(path, ": ", rest));
}

}  // namespace xmod
