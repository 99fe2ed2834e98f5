// llm.c token shards: header validation, memory-mapped reading, atomic writing, globbing.
// The on-disk integers are little-endian; like llm.c we read them natively, so hosts must
// be little-endian (x86-64, AArch64).
#include "data/shard.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

static_assert(sizeof(uint16_t) == 2 && sizeof(int32_t) == 4);

absl::Status ErrnoStatus(const std::string& path, const char* what) {
  int err = errno;
  std::string message = absl::StrCat(path, ": ", what, ": ", std::strerror(err));
  return err == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
}

// Closes a file descriptor when it goes out of scope.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// Reads exactly `n` bytes at offset 0; DataLoss if the file is shorter.
absl::Status ReadPrefix(int fd, const std::string& path, char* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd, out + done, n - done, static_cast<off_t>(done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(path, "cannot read");
    }
    if (got == 0) {
      return absl::DataLossError(
          absl::StrCat(path, ": truncated header: file holds ", done, " bytes, header needs ", n));
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardHeader> ReadHeaderFd(int fd, const std::string& path) {
  std::array<int32_t, kShardHeaderInts> ints{};
  absl::Status read = ReadPrefix(fd, path, reinterpret_cast<char*>(ints.data()), kShardHeaderBytes);
  if (!read.ok()) return read;
  ShardHeader header{ints[0], ints[1], ints[2]};
  if (header.magic != kShardMagic) {
    return absl::DataLossError(
        absl::StrCat(path, ": bad magic ", header.magic, " (want ", kShardMagic, ")"));
  }
  if (header.version != kShardVersion) {
    return absl::DataLossError(absl::StrCat(path, ": unsupported version ", header.version,
                                            " (want ", kShardVersion, ")"));
  }
  if (header.num_tokens < 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": negative token count ", header.num_tokens, " in header"));
  }
  return header;
}

absl::Status WriteAll(int fd, const std::string& path, const char* data, size_t n) {
  while (n > 0) {
    ssize_t put = ::write(fd, data, n);
    if (put < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(path, "cannot write");
    }
    data += put;
    n -= static_cast<size_t>(put);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShardHeader> ReadShardHeader(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(path, "cannot open");
  FdCloser closer(fd);
  return ReadHeaderFd(fd, path);
}

ShardReader::ShardReader(std::string path, void* map, size_t map_bytes, size_t size)
    : path_(std::move(path)),
      map_(map),
      map_bytes_(map_bytes),
      tokens_(size == 0 ? nullptr
                        : reinterpret_cast<const uint16_t*>(static_cast<const char*>(map) +
                                                            kShardHeaderBytes)),
      size_(size) {}

ShardReader::~ShardReader() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

absl::StatusOr<std::unique_ptr<ShardReader>> ShardReader::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(path, "cannot open");
  FdCloser closer(fd);
  absl::StatusOr<ShardHeader> header = ReadHeaderFd(fd, path);
  if (!header.ok()) return header.status();
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(path, "cannot stat");
  const size_t file_bytes = static_cast<size_t>(st.st_size);
  const size_t held = (file_bytes - kShardHeaderBytes) / sizeof(uint16_t);
  const size_t want = static_cast<size_t>(header->num_tokens);
  const size_t expected_bytes = kShardHeaderBytes + want * sizeof(uint16_t);
  if (file_bytes != expected_bytes) {
    const bool odd = (file_bytes - kShardHeaderBytes) % sizeof(uint16_t) != 0;
    return absl::DataLossError(absl::StrCat(
        path, ": ", file_bytes < expected_bytes ? "truncated" : "trailing data", ": header says ",
        want, " tokens, file holds ", held, odd ? " and an odd byte" : ""));
  }
  void* map = nullptr;
  if (want > 0) {
    map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return ErrnoStatus(path, "cannot mmap");
  }
  return std::unique_ptr<ShardReader>(
      new ShardReader(path, want > 0 ? map : nullptr, file_bytes, want));
}

absl::Status WriteShard(const std::string& path, absl::Span<const uint16_t> tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", tokens.size(), " tokens exceed the header's int32 count"));
  }
  std::array<int32_t, kShardHeaderInts> header{};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());

  const std::string temp = absl::StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(temp, "cannot create");
  absl::Status status =
      WriteAll(fd, temp, reinterpret_cast<const char*>(header.data()), kShardHeaderBytes);
  if (status.ok()) {
    status = WriteAll(fd, temp, reinterpret_cast<const char*>(tokens.data()),
                      tokens.size() * sizeof(uint16_t));
  }
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoStatus(temp, "cannot sync");
  if (::close(fd) != 0 && status.ok()) status = ErrnoStatus(temp, "cannot close");
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(path, "cannot rename onto");
  }
  if (!status.ok()) ::unlink(temp.c_str());
  return status;
}

absl::StatusOr<std::vector<std::string>> ExpandGlob(const std::string& pattern) {
  glob_t matches;
  std::memset(&matches, 0, sizeof(matches));
  int rc = ::glob(pattern.c_str(), 0, nullptr, &matches);
  std::vector<std::string> paths;
  if (rc == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) paths.emplace_back(matches.gl_pathv[i]);
  }
  ::globfree(&matches);
  if (rc == GLOB_NOMATCH || (rc == 0 && paths.empty())) {
    return absl::NotFoundError(absl::StrCat("no files match ", pattern));
  }
  if (rc != 0) return absl::InternalError(absl::StrCat("glob failed on ", pattern));
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace xmod
