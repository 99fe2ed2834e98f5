// See confined_path.h.
#include "common/confined_path.h"

#include <sys/stat.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

namespace fs = std::filesystem;

// Whether `inner` is `outer` followed by at least one more component (both normal).
bool StrictlyInside(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // the empty last component of a trailing '/'
    if (i == inner.end() || *i != *o) return false;
  }
  for (; i != inner.end(); ++i) {
    if (!i->empty()) return true;
  }
  return false;
}

absl::Status Outside(absl::string_view field, const std::string& path, const std::string& dir,
                     absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", path, " ", why, " (must be a file inside ", dir, ")"));
}

}  // namespace

absl::Status CheckPathUnder(absl::string_view field, const std::string& path,
                            const std::string& dir) {
  const fs::path p(path);
  for (const fs::path& component : p) {
    if (component == "..") return Outside(field, path, dir, "has a '..' component");
  }
  const fs::path d(dir);
  if (p.is_absolute() != d.is_absolute() ||
      !StrictlyInside(p.lexically_normal(), d.lexically_normal())) {
    return Outside(field, path, dir, "is outside the run's checkpoint folder");
  }
  return absl::OkStatus();
}

absl::Status CheckFileUnder(absl::string_view field, const std::string& path,
                            const std::string& dir, int64_t bytes) {
  std::error_code error;
  const fs::path real_dir = fs::canonical(dir, error);
  if (error) return absl::OkStatus();  // not visible here: the lexical check is all there is
  const fs::path real = fs::weakly_canonical(path, error);
  if (error || !StrictlyInside(real, real_dir)) {
    return Outside(field, path, dir, "resolves outside the run's checkpoint folder");
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return absl::OkStatus();  // not (yet) visible here
  if (!S_ISREG(st.st_mode)) return Outside(field, path, dir, "is not a regular file");
  if (bytes >= 0 && st.st_size != bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, " has ", st.st_size, " bytes, the report says ", bytes));
  }
  return absl::OkStatus();
}

}  // namespace xmod
