// DatabaseLock: one xmod-coordinator per database. A coordinator takes an exclusive flock(2)
// on the lock file beside its database (<db>.lock) before it opens the database and holds it
// for its whole life; the kernel releases it when the process ends, however it ends (SIGKILL
// included). The file names the holder — pid, host and start time — so that a second
// coordinator refuses to start with a message naming the first. The lock is advisory and
// belongs to the open file description: a second Acquire in the same process is refused too.
// See docs/operations.md for shared (network) file systems.
#ifndef XMOD_COORDINATOR_STORE_DATABASE_LOCK_H_
#define XMOD_COORDINATOR_STORE_DATABASE_LOCK_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace xmod {

class DatabaseLock {
 public:
  // Locks `db_path` + ".lock" (created if missing, never removed) and records this process
  // in it. FAILED_PRECONDITION naming the holder when another holds it; UNAVAILABLE when the
  // file cannot be opened, locked or written.
  static absl::StatusOr<std::unique_ptr<DatabaseLock>> Acquire(const std::string& db_path);
  // Releases the lock (closes the file).
  ~DatabaseLock();
  DatabaseLock(const DatabaseLock&) = delete;
  DatabaseLock& operator=(const DatabaseLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  DatabaseLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::string path_;
  const int fd_;
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_DATABASE_LOCK_H_
