// Online backups and restores of the coordinator's database. See backup.h.
#include "coordinator/store/backup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "resultsdb/schema.h"

namespace xmod {
namespace {

// The first row of a one-column `sql`, as text.
absl::StatusOr<std::string> FirstCell(Db& db, const char* sql) {
  absl::StatusOr<Stmt> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::string();
  return stmt->Text(0);
}

// Copies every page `source` sees in its read transaction into `dest`.
absl::Status CopyPages(Db& source, Db& dest, const std::string& path) {
  sqlite3_backup* backup = sqlite3_backup_init(dest.raw(), "main", source.raw(), "main");
  if (backup == nullptr) return dest.Error(absl::StrCat("backup into ", path));
  const int step = sqlite3_backup_step(backup, -1);  // all pages, in one snapshot
  sqlite3_backup_finish(backup);
  if (step != SQLITE_DONE) return dest.Error(absl::StrCat("backup into ", path));
  return absl::OkStatus();
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Moves `from` to `to` when it exists.
absl::Status MoveIfExists(const std::string& from, const std::string& to) {
  if (!Exists(from)) return absl::OkStatus();
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot move ", from, " to ", to, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BackupInfo> WriteBackup(Db& source, const std::string& path) {
  if (Exists(path)) return absl::AlreadyExistsError(absl::StrCat(path, " exists already"));
  absl::Status status = [&]() -> absl::Status {
    absl::StatusOr<std::unique_ptr<Db>> dest =
        Db::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, /*busy_timeout_ms=*/1000);
    if (!dest.ok()) return dest.status();
    if (absl::Status s = CopyPages(source, **dest, path); !s.ok()) return s;
    // A file of its own, no -wal beside it to carry or lose. The backup's commit was synced
    // (rollback journal, synchronous = FULL).
    return (*dest)->Exec("PRAGMA journal_mode = DELETE");
  }();
  absl::StatusOr<BackupInfo> checked =
      status.ok() ? CheckBackup(path) : absl::StatusOr<BackupInfo>(status);
  if (!checked.ok()) ::unlink(path.c_str());
  return checked;
}

absl::StatusOr<BackupInfo> CheckBackup(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Db>> db = Db::OpenReadOnly(path, /*busy_timeout_ms=*/1000);
  if (!db.ok()) return db.status();
  absl::StatusOr<std::string> integrity = FirstCell(**db, "PRAGMA integrity_check");
  if (!integrity.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not an xmod database: ", integrity.status().message()));
  }
  if (*integrity != "ok") {
    return absl::DataLossError(absl::StrCat(path, " fails integrity_check: ", *integrity));
  }
  absl::StatusOr<int> version = SchemaVersion(**db);
  if (!version.ok()) return version.status();
  if (*version < 1 || *version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has schema version ", *version, "; this coordinator opens 1 to ", kSchemaVersion));
  }
  db->reset();
  absl::StatusOr<std::string> sha256 = Sha256File(path);
  if (!sha256.ok()) return sha256.status();
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return absl::InternalError(absl::StrCat("stat ", path));
  return BackupInfo{static_cast<int64_t>(st.st_size), *std::move(sha256), *version};
}

absl::StatusOr<BackupInfo> RestoreDatabase(const std::string& backup, const std::string& db_path,
                                           int64_t now_ms) {
  absl::StatusOr<BackupInfo> checked = CheckBackup(backup);
  if (!checked.ok()) return checked.status();
  const std::string aside = absl::StrCat(db_path, ".before-restore-", now_ms);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    if (absl::Status s = MoveIfExists(db_path + suffix, aside + suffix); !s.ok()) return s;
  }
  if (absl::Status s = CopyFileAtomic(backup, db_path); !s.ok()) {
    // Put back what was there: the database is as it was.
    for (const char* suffix : {"", "-wal", "-shm"}) {
      MoveIfExists(aside + suffix, db_path + suffix).IgnoreError();
    }
    return s;
  }
  return checked;
}

}  // namespace xmod
