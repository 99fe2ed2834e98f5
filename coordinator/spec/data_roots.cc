// See data_roots.h.
#include "coordinator/spec/data_roots.h"

#include <glob.h>
#include <stdlib.h>

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/field_path.h"

namespace xmod {
namespace {

// The components of absolute `path` with "." and ".." resolved lexically (a wildcard component
// counts as one level, as glob matches it); nullopt when ".." climbs above "/".
std::optional<std::vector<std::string>> Components(const std::string& path) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (out.empty()) return std::nullopt;
      out.pop_back();
      continue;
    }
    out.emplace_back(part);
  }
  return out;
}

bool HasPrefix(const std::vector<std::string>& path, const std::vector<std::string>& prefix) {
  if (prefix.size() > path.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (path[i] != prefix[i]) return false;
  }
  return true;
}

// The real path of `path` (symbolic links resolved), nullopt when it does not exist.
std::optional<std::string> RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&free)> real(realpath(path.c_str(), nullptr), &free);
  if (real == nullptr) return std::nullopt;
  return std::string(real.get());
}

bool UnderRealRoot(const std::string& file, const std::vector<std::string>& roots) {
  std::optional<std::string> real_file = RealPath(file);
  if (!real_file) return false;
  std::optional<std::vector<std::string>> file_parts = Components(*real_file);
  for (const std::string& root : roots) {
    std::optional<std::string> real_root = RealPath(root);
    if (!real_root) continue;
    std::optional<std::vector<std::string>> root_parts = Components(*real_root);
    if (file_parts && root_parts && HasPrefix(*file_parts, *root_parts)) return true;
  }
  return false;
}

}  // namespace

absl::Status ValidateDataRoots(const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    if (root.empty() || root[0] != '/' || !Components(root)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data_root: \"", root, "\" is not an absolute directory path"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDataGlob(const std::string& field, const std::string& pattern,
                           const std::vector<std::string>& roots, bool check_exists) {
  if (roots.empty()) return absl::OkStatus();
  const std::string where =
      absl::StrCat(" (the coordinator's --data_root: ", absl::StrJoin(roots, ", "), ")");
  std::optional<std::vector<std::string>> parts;
  if (!pattern.empty() && pattern[0] == '/') parts = Components(pattern);
  bool inside = false;
  for (const std::string& root : roots) {
    std::optional<std::vector<std::string>> root_parts = Components(root);
    inside |= parts && root_parts && HasPrefix(*parts, *root_parts);
  }
  if (!inside) {
    return InvalidField(
        field, absl::StrCat("\"", pattern, "\" is not an absolute path under a data root", where));
  }
  if (!check_exists) return absl::OkStatus();
  glob_t matches;
  size_t found = 0;
  if (glob(pattern.c_str(), 0, nullptr, &matches) == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) {
      if (UnderRealRoot(matches.gl_pathv[i], roots)) ++found;
    }
  }
  globfree(&matches);
  if (found == 0) {
    return InvalidField(field,
                        absl::StrCat("no file under a data root matches \"", pattern, "\"", where));
  }
  return absl::OkStatus();
}

}  // namespace xmod
