// Confined paths: whether a path another process named lies inside a folder this process
// owns (a run's checkpoint folder), for the coordinator before it records a checkpoint and
// for the worker before it deletes one. Two checks: a lexical one that always applies, and a
// file-system one that applies where this machine sees the folder (the checkpoint root is
// shared storage, but a coordinator need not mount it). Thread-compatible free functions.
#ifndef XMOD_COMMON_CONFINED_PATH_H_
#define XMOD_COMMON_CONFINED_PATH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace xmod {

// OK when `path` names something strictly inside `dir` (both compared after lexical
// normalisation, so "a/./b" is "a/b"), `path` has no ".." component, and both are absolute or
// both relative. INVALID_ARGUMENT "<field>: ..." naming `dir` otherwise.
absl::Status CheckPathUnder(absl::string_view field, const std::string& path,
                            const std::string& dir);

// Where `dir` exists on this machine: `path` resolved (symlinks of its existing folders
// followed) stays inside `dir` resolved, and if `path` exists it is a regular file, not a
// symlink, of `bytes` bytes (any size when `bytes` < 0). OK when `dir` does not exist here.
// INVALID_ARGUMENT "<field>: ..." otherwise. Call after CheckPathUnder.
absl::Status CheckFileUnder(absl::string_view field, const std::string& path,
                            const std::string& dir, int64_t bytes);

}  // namespace xmod

#endif  // XMOD_COMMON_CONFINED_PATH_H_
