#include "common/files.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

// The status of a failed call on `path`, coded by errno: NOT_FOUND for a missing file,
// RESOURCE_EXHAUSTED for a full disk or quota (so that callers can tell "free space, then
// retry" from a fault), UNAVAILABLE for an I/O error, INTERNAL for the rest.
absl::Status ErrnoStatus(absl::string_view what, const std::string& path) {
  int err = errno;
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    case EIO:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

std::string HexDigest(const unsigned char* digest, unsigned int size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (unsigned int i = 0; i < size; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

using DigestContext = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

// `path`.tmp.<host>.<pid>.<random>: unique among writers on every host that shares the
// folder (a pid alone repeats across hosts, and on one host across restarts).
std::string TempName(const std::string& path) {
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  for (char* c = host; *c != '\0'; ++c) {
    if (*c == '/') *c = '_';
  }
  unsigned char nonce[8] = {0};
  RAND_bytes(nonce, sizeof(nonce));
  return absl::StrCat(path, ".tmp.", host, ".", getpid(), ".", HexDigest(nonce, sizeof(nonce)));
}

// fsync of the folder holding `path`, so that a rename into it survives a crash.
absl::Status SyncParent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open folder", dir);
  absl::Status status = ::fsync(fd) == 0 ? absl::OkStatus() : ErrnoStatus("cannot sync", dir);
  ::close(fd);
  return status;
}

// Sha256File on an open descriptor of `path`.
absl::StatusOr<std::string> Sha256Descriptor(int fd, const std::string& path,
                                             int64_t expected_bytes) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("cannot stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  if (expected_bytes >= 0 && st.st_size != expected_bytes) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", st.st_size, " bytes, ", expected_bytes, " recorded"));
  }
  DigestContext context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr);
  std::string buffer(1 << 20, '\0');
  // Never past the size seen at open: a file that grows meanwhile does not keep us reading.
  int64_t left = st.st_size;
  while (left > 0) {
    const ssize_t n = ::read(fd, buffer.data(), std::min<int64_t>(left, buffer.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("cannot read", path);
    if (n == 0) return absl::DataLossError(absl::StrCat(path, ": shrank while being read"));
    EVP_DigestUpdate(context.get(), buffer.data(), static_cast<size_t>(n));
    left -= n;
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(context.get(), digest, &size);
  return HexDigest(digest, size);
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus("cannot open", path);
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return ErrnoStatus("cannot read", path);
  return contents.str();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, int64_t max_bytes) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return ErrnoStatus("cannot open", path);
  if (!S_ISREG(info.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus("cannot open", path);
  std::string contents(static_cast<size_t>(max_bytes) + 1, '\0');
  in.read(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (in.bad()) return ErrnoStatus("cannot read", path);
  contents.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<int64_t>(contents.size()) > max_bytes) {
    return absl::OutOfRangeError(
        absl::StrCat(path, ": larger than the limit of ", max_bytes, " bytes"));
  }
  return contents;
}

namespace {

// Writes all `size` bytes at `data` to `fd` (the file `path`), retrying short writes.
absl::Status WriteAll(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot write", path);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Open(const std::string& path) {
  std::string temp = TempName(path);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("cannot create", temp);
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(path, std::move(temp), fd));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

absl::Status AtomicFileWriter::Append(absl::string_view bytes) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(temp_, " is closed"));
  return WriteAll(fd_, bytes.data(), bytes.size(), temp_);
}

absl::Status AtomicFileWriter::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(temp_, " is closed"));
  absl::Status status = ::fsync(fd_) == 0 ? absl::OkStatus() : ErrnoStatus("cannot sync", temp_);
  if (::close(fd_) != 0 && status.ok()) status = ErrnoStatus("cannot close", temp_);
  fd_ = -1;
  if (status.ok() && ::rename(temp_.c_str(), path_.c_str()) != 0) {
    status = ErrnoStatus("cannot rename onto", path_);
  }
  if (!status.ok()) return status;
  committed_ = true;
  return SyncParent(path_);
}

absl::Status WriteFileAtomic(const std::string& path, absl::string_view contents) {
  absl::StatusOr<std::unique_ptr<AtomicFileWriter>> writer = AtomicFileWriter::Open(path);
  if (!writer.ok()) return writer.status();
  if (absl::Status s = (*writer)->Append(contents); !s.ok()) return s;
  return (*writer)->Commit();
}

absl::Status CopyFileAtomic(const std::string& from, const std::string& to) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return ErrnoStatus("cannot open", from);
  absl::Cleanup close_in = [in] { ::close(in); };
  absl::StatusOr<std::unique_ptr<AtomicFileWriter>> writer = AtomicFileWriter::Open(to);
  if (!writer.ok()) return writer.status();
  std::vector<char> buffer(1 << 20);
  while (true) {
    const ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("cannot read", from);
    if (n == 0) return (*writer)->Commit();
    if (absl::Status s = (*writer)->Append(absl::string_view(buffer.data(), n)); !s.ok()) return s;
  }
}

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  return HexDigest(digest, size);
}

absl::StatusOr<std::string> Sha256File(const std::string& path, int64_t expected_bytes) {
  // Non-blocking, so that opening a FIFO does not wait for a writer (it is refused below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus("cannot open", path);
  absl::StatusOr<std::string> digest = Sha256Descriptor(fd, path, expected_bytes);
  ::close(fd);
  return digest;
}

absl::Status MakeDirs(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error)
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", error.message()));
  return absl::OkStatus();
}

}  // namespace xmod
