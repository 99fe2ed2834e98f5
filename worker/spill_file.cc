#include "worker/spill_file.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

constexpr int64_t kHeaderBytes = 12;  // 4-byte length, 8-byte seq

void PutLittleEndian(uint64_t value, int bytes, char* out) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

uint64_t GetLittleEndian(const char* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return value;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SpillFile>> SpillFile::Create(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  }
  return std::unique_ptr<SpillFile>(new SpillFile(path, fd));
}

absl::StatusOr<std::unique_ptr<SpillFile>> SpillFile::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  }
  std::unique_ptr<SpillFile> file(new SpillFile(path, fd));
  char header[kHeaderBytes];
  while (file->ReadAt(file->size_, header, sizeof(header))) {
    const int64_t length = static_cast<int64_t>(GetLittleEndian(header, 4));
    char last;
    if (length > 0 && !file->ReadAt(file->size_ + kHeaderBytes + length - 1, &last, 1)) break;
    file->size_ += kHeaderBytes + length;
    file->last_seq_ = static_cast<int64_t>(GetLittleEndian(header + 4, 8));
    ++file->written_;
  }
  if (ftruncate(fd, file->size_) != 0) {
    // Nothing reads past size_.
  }
  return file;
}

SpillFile::~SpillFile() {
  close(fd_);
  if (!persisted_) unlink(path_.c_str());
}

absl::Status SpillFile::Append(int64_t seq, const v1::MetricPoint& point, bool durable) {
  const std::string body = point.SerializeAsString();
  std::string record(kHeaderBytes, '\0');
  PutLittleEndian(static_cast<uint64_t>(body.size()), 4, &record[0]);
  PutLittleEndian(static_cast<uint64_t>(seq), 8, &record[4]);
  record += body;
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = pwrite(fd_, record.data() + done, record.size() - done, size_ + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Failed("write");
    done += static_cast<size_t>(n);
  }
  if (durable && fdatasync(fd_) != 0) return Failed("fdatasync");
  size_ += static_cast<int64_t>(record.size());
  ++written_;
  last_seq_ = seq;
  return absl::OkStatus();
}

absl::Status SpillFile::Persist(const std::string& path) {
  if (fdatasync(fd_) != 0) return Failed("fdatasync");
  if (std::rename(path_.c_str(), path.c_str()) != 0) return Failed("rename");
  path_ = path;
  persisted_ = true;
  return absl::OkStatus();
}

absl::StatusOr<bool> SpillFile::ReadNext(int64_t* seq, v1::MetricPoint* point) {
  if (read_ == written_) return false;
  char header[kHeaderBytes];
  if (!ReadAt(offset_, header, sizeof(header))) return Failed("read");
  const uint64_t length = GetLittleEndian(header, 4);
  std::string body(length, '\0');
  if (!ReadAt(offset_ + kHeaderBytes, body.data(), length) || !point->ParseFromString(body)) {
    return absl::DataLossError(absl::StrCat(path_, ": unreadable record at ", offset_));
  }
  *seq = static_cast<int64_t>(GetLittleEndian(header + 4, 8));
  offset_ += kHeaderBytes + static_cast<int64_t>(length);
  ++read_;
  return true;
}

bool SpillFile::ReadAt(int64_t offset, char* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = pread(fd_, out + done, n - done, offset + done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += static_cast<size_t>(got);
  }
  return true;
}

absl::Status SpillFile::Failed(const char* what) {
  const std::string reason = strerror(errno);
  if (ftruncate(fd_, size_) != 0) {
    // The torn tail stays; nothing reads past size_.
  }
  return absl::UnavailableError(absl::StrCat(what, " ", path_, ": ", reason));
}

}  // namespace xmod
