// Files: whole-file reads, atomic writes (temp file + fsync + rename) and SHA-256 digests,
// used for specs, checkpoints and their manifests. Thread-compatible free functions.
#ifndef XMOD_COMMON_FILES_H_
#define XMOD_COMMON_FILES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xmod {

// The whole file. NotFound if it does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// The whole file, which must be a regular one (FAILED_PRECONDITION otherwise) of at most
// `max_bytes` bytes (OUT_OF_RANGE naming both sizes otherwise, reading no further): for small
// files another process wrote, such as a checkpoint's digest sidecar. NotFound if absent.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, int64_t max_bytes);

// Writes `contents` to `path` atomically and durably: readers see the old file or the whole
// new one. A temporary `path`.tmp.<host>.<pid>.<random> (unique across hosts sharing the
// folder) is written, fsynced and renamed onto `path`, then the folder is fsynced so the
// rename survives a crash.
absl::Status WriteFileAtomic(const std::string& path, absl::string_view contents);

// Lower-case hex SHA-256 of a file's bytes / of a buffer. The file must be a regular one
// (FAILED_PRECONDITION otherwise, so /dev/zero is never read), of `expected_bytes` bytes when
// that is >= 0 (DATA_LOSS naming both sizes otherwise, before reading anything), and is read
// no further than the size it had when opened.
absl::StatusOr<std::string> Sha256File(const std::string& path, int64_t expected_bytes = -1);
std::string Sha256Hex(absl::string_view bytes);

// mkdir -p.
absl::Status MakeDirs(const std::string& path);

}  // namespace xmod

#endif  // XMOD_COMMON_FILES_H_
