// See backups.h.
#include "coordinator/api/backups.h"

#include <unistd.h>

#include <fstream>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "coordinator/store/backup.h"

namespace xmod {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

}  // namespace

absl::Status Backups::Stream(grpc::ServerWriterInterface<xmod::v1::BackupChunk>* writer,
                             const std::function<bool()>& cancelled) {
  if (dir_.empty()) return absl::UnavailableError("this coordinator takes no backups");
  if (busy_.exchange(true)) {
    return absl::ResourceExhaustedError("Backup: another backup is being taken; try again later");
  }
  absl::Cleanup idle = [this] { busy_ = false; };
  const int64_t now = clock_->NowMillis();
  const std::string path = absl::StrCat(dir_, "/.xmod-backup-", now, "-", getpid(), ".db");
  absl::Cleanup remove = [&path] { ::unlink(path.c_str()); };
  absl::StatusOr<BackupInfo> taken =
      store_->ReadValue([&](Db& db) { return WriteBackup(db, path); });
  if (!taken.ok()) return taken.status();
  xmod::v1::BackupInfo info;
  info.set_bytes(taken->bytes);
  info.set_sha256(taken->sha256);
  info.set_schema_version(taken->schema_version);
  info.set_created_unix_ms(now);
  return Send(path, info, writer, cancelled);
}

absl::Status Backups::Send(const std::string& path, const xmod::v1::BackupInfo& info,
                           grpc::ServerWriterInterface<xmod::v1::BackupChunk>* writer,
                           const std::function<bool()>& cancelled) {
  xmod::v1::BackupChunk first;
  *first.mutable_info() = info;
  if (!writer->Write(first)) return absl::CancelledError("the caller went away");
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buffer(kChunkBytes);
  int64_t sent = 0;
  while (sent < info.bytes()) {
    if (cancelled && cancelled()) return absl::CancelledError("the caller went away");
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize n = in.gcount();
    if (n <= 0) {
      return absl::InternalError(absl::StrCat("backup file ", path, " ended after ", sent, " of ",
                                              info.bytes(), " bytes"));
    }
    xmod::v1::BackupChunk chunk;
    chunk.set_data(buffer.data(), static_cast<size_t>(n));
    if (!writer->Write(chunk)) return absl::CancelledError("the caller went away");
    sent += n;
  }
  return absl::OkStatus();
}

}  // namespace xmod
