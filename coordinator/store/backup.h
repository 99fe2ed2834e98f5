// Online backups of the coordinator's database, and their restore (docs/operations.md,
// "Backup"). A backup is a consistent snapshot taken with SQLite's online backup API from a
// read transaction while the coordinator runs and writes (WAL: writers are never blocked), in
// a file of its own that is fsynced and passes PRAGMA integrity_check before anyone is given
// it. A restore puts a checked backup in the database's place before a coordinator opens it,
// moving what was there aside (never deleting it). Free functions, thread-compatible; the
// callers hold what they need (a read connection; the database lock).
#ifndef XMOD_COORDINATOR_STORE_BACKUP_H_
#define XMOD_COORDINATOR_STORE_BACKUP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

// What a backup file holds.
struct BackupInfo {
  int64_t bytes = 0;
  std::string sha256;  // lower-case hex of the file's bytes
  int schema_version = 0;
};

// Copies the database that `source` reads, as one snapshot, into the new file `path` (it must
// not exist: ALREADY_EXISTS), in rollback-journal mode, fsynced, and checks the copy
// (CheckBackup). Nothing is left at `path` on error. A full disk is RESOURCE_EXHAUSTED.
absl::StatusOr<BackupInfo> WriteBackup(Db& source, const std::string& path);

// Checks the file at `path`: a SQLite database (else INVALID_ARGUMENT) that passes
// integrity_check (else DATA_LOSS quoting its first complaint), of a schema version this
// binary can open (else FAILED_PRECONDITION naming both versions).
absl::StatusOr<BackupInfo> CheckBackup(const std::string& path);

// Restores `backup` as the database at `db_path`, which no coordinator may have open (the
// caller holds its DatabaseLock): checks it (CheckBackup), moves the database and its -wal and
// -shm files, where they exist, to "<db_path>.before-restore-<now_ms>" (-wal, -shm), and puts
// a copy of the backup in place (written beside it, fsynced, renamed). Returns what was
// restored. On error the database is where it was.
absl::StatusOr<BackupInfo> RestoreDatabase(const std::string& backup, const std::string& db_path,
                                           int64_t now_ms);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_BACKUP_H_
