// Backups: the Backup RPC's side (docs/operations.md, "Backup"). Takes an online backup of the
// store (coordinator/store/backup.h) into a temporary file in `dir` — the database's folder,
// so the snapshot never crosses file systems — checks it, streams it to the caller as its
// BackupInfo and then its bytes in pieces of at most 1 MiB, and removes the file whatever
// happens. One backup at a time: a second caller meanwhile is RESOURCE_EXHAUSTED.
// Thread-safe.
#ifndef XMOD_COORDINATOR_API_BACKUPS_H_
#define XMOD_COORDINATOR_API_BACKUPS_H_

#include <grpcpp/support/sync_stream.h>

#include <atomic>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"
#include "coordinator/store/store.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {

class Backups {
 public:
  // `store` and `clock` must outlive it; `dir` "" takes no backups (UNAVAILABLE).
  Backups(Store* store, std::string dir, Clock* clock)
      : store_(store), dir_(std::move(dir)), clock_(clock) {}

  // Takes one backup and writes it to `writer`. CANCELLED once `cancelled` returns true (the
  // caller went away; polled between pieces) or a write fails; the store's errors as they are
  // (a full disk: RESOURCE_EXHAUSTED).
  absl::Status Stream(grpc::ServerWriterInterface<xmod::v1::BackupChunk>* writer,
                      const std::function<bool()>& cancelled);

 private:
  absl::Status Send(const std::string& path, const xmod::v1::BackupInfo& info,
                    grpc::ServerWriterInterface<xmod::v1::BackupChunk>* writer,
                    const std::function<bool()>& cancelled);

  Store* const store_;
  const std::string dir_;
  Clock* const clock_;
  std::atomic<bool> busy_{false};
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_BACKUPS_H_
