#include "common/files.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

absl::Status ErrnoStatus(absl::string_view what, const std::string& path) {
  int err = errno;
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  return err == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
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

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus("cannot open", path);
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return ErrnoStatus("cannot read", path);
  return contents.str();
}

absl::Status WriteFileAtomic(const std::string& path, absl::string_view contents) {
  const std::string temp = TempName(path);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("cannot create", temp);
  const char* data = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status status = ErrnoStatus("cannot write", temp);
      ::close(fd);
      ::unlink(temp.c_str());
      return status;
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    absl::Status status = ErrnoStatus("cannot sync", temp);
    ::unlink(temp.c_str());
    return status;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    absl::Status status = ErrnoStatus("cannot rename onto", path);
    ::unlink(temp.c_str());
    return status;
  }
  return SyncParent(path);
}

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  return HexDigest(digest, size);
}

absl::StatusOr<std::string> Sha256File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus("cannot open", path);
  DigestContext context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr);
  std::string buffer(1 << 20, '\0');
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    EVP_DigestUpdate(context.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return ErrnoStatus("cannot read", path);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(context.get(), digest, &size);
  return HexDigest(digest, size);
}

absl::Status MakeDirs(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error)
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", error.message()));
  return absl::OkStatus();
}

}  // namespace xmod
