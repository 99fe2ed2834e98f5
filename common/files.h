// Files: whole-file reads, atomic writes (temp file + fsync + rename) and SHA-256 digests,
// used for specs, checkpoints and their manifests. Thread-compatible free functions.
#ifndef XMOD_COMMON_FILES_H_
#define XMOD_COMMON_FILES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

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
// The same for a copy of the file `from` (of any size, read in pieces): `to` holds the old
// file or the whole copy. A full disk is RESOURCE_EXHAUSTED (for every function here).
absl::Status CopyFileAtomic(const std::string& from, const std::string& to);

// Lower-case hex SHA-256 of a file's bytes / of a buffer. The file must be a regular one
// (FAILED_PRECONDITION otherwise, so /dev/zero is never read), of `expected_bytes` bytes when
// that is >= 0 (DATA_LOSS naming both sizes otherwise, before reading anything), and is read
// no further than the size it had when opened.
absl::StatusOr<std::string> Sha256File(const std::string& path, int64_t expected_bytes = -1);
std::string Sha256Hex(absl::string_view bytes);

// A file written in pieces that appears at `path` whole or not at all: Append() writes a
// temporary file beside it, Commit() fsyncs it, renames it onto `path` and fsyncs the folder.
// A writer destroyed without a successful Commit() removes its temporary file. For files too
// large to hold in memory (a database backup). Thread-compatible.
class AtomicFileWriter {
 public:
  // The temporary file is created at once; errors as ErrnoStatus codes them.
  static absl::StatusOr<std::unique_ptr<AtomicFileWriter>> Open(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  absl::Status Append(absl::string_view bytes);
  // The temporary file's path (to check what was written before Commit).
  const std::string& temp_path() const { return temp_; }
  absl::Status Commit();

 private:
  AtomicFileWriter(std::string path, std::string temp, int fd)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}

  const std::string path_;
  const std::string temp_;
  int fd_;  // -1 once closed
  bool committed_ = false;
};

// mkdir -p.
absl::Status MakeDirs(const std::string& path);

}  // namespace xmod

#endif  // XMOD_COMMON_FILES_H_
