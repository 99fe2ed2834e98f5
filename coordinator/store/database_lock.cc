// See database_lock.h.
#include "coordinator/store/database_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace xmod {
namespace {

// What the lock file says of its holder ("pid P, host H, started T"), at most a line.
std::string ReadHolder(int fd) {
  char buffer[512];
  const ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
  if (n <= 0) return "";
  return std::string(absl::StripAsciiWhitespace(absl::string_view(buffer, n)));
}

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DatabaseLock>> DatabaseLock::Acquire(const std::string& db_path) {
  const std::string path = db_path + ".lock";
  // No O_TRUNC: until we hold the lock, the holder's record must stay readable.
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("--db: cannot open the lock file", path);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = ReadHolder(fd);
    close(fd);
    if (error != EWOULDBLOCK) {
      errno = error;
      return Errno("--db: cannot lock", path);
    }
    return absl::FailedPreconditionError(
        absl::StrCat("--db ", db_path, ": another xmod-coordinator holds ", path, " (",
                     holder.empty() ? "it has not recorded itself yet" : holder,
                     "); one coordinator per database: stop that one first"));
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string record =
      absl::StrCat("pid ", getpid(), ", host ", host, ", started ",
                   absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()), "\n");
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, record.data(), record.size(), 0) != static_cast<ssize_t>(record.size())) {
    absl::Status status = Errno("--db: cannot write the lock file", path);
    close(fd);
    return status;
  }
  return std::unique_ptr<DatabaseLock>(new DatabaseLock(path, fd));
}

DatabaseLock::~DatabaseLock() { close(fd_); }

}  // namespace xmod
