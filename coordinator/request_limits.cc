// See request_limits.h.
#include "coordinator/request_limits.h"

#include "absl/strings/str_cat.h"

namespace xmod {

absl::Status CheckRange(const std::string& path, int64_t value, int64_t min, int64_t cap) {
  if (value < min) return absl::InvalidArgumentError(absl::StrCat(path, ": must be >= ", min));
  if (value > cap) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", value, " exceeds the limit ", cap));
  }
  return absl::OkStatus();
}

}  // namespace xmod
