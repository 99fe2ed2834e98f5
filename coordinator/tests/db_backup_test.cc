// Online backups and restores of the database (coordinator/store/backup.h): a backup taken
// while writes go on is one consistent snapshot that passes integrity_check; a file that is
// not a backup is refused naming why; a restore moves the old database aside and puts the
// backup in its place, and a refused one leaves the database as it was.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "coordinator/store/backup.h"
#include "coordinator/store/event_rows.h"
#include "coordinator/store/store.h"
#include "coordinator/tests/test_util.h"
#include "gtest/gtest.h"
#include "resultsdb/schema.h"

namespace xmod {
namespace {

// One cell of `sql` on the database file at `path`, as text.
std::string Cell(const std::string& path, const std::string& sql) {
  absl::StatusOr<std::unique_ptr<Db>> db = Db::OpenReadOnly(path, 1000);
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) return "";
  absl::StatusOr<Stmt> stmt = (*db)->Prepare(sql);
  EXPECT_TRUE(stmt.ok()) << stmt.status();
  if (!stmt.ok() || !stmt->Step().value_or(false)) return "";
  return stmt->Text(0);
}

// An event whose text is `marker`.
absl::Status AddEvent(Store& store, const std::string& marker) {
  return store.WriteAndWait(
      [&](Db& db) { return InsertEvent(db, 1, xmod::v1::EVENT_RUNS_ADDED, 0, 0, marker); });
}

TEST(DbBackupTest, ABackupTakenWhileWritesGoOnIsOneConsistentSnapshot) {
  const std::string dir = NewTestDir("backup");
  std::unique_ptr<Store> store = OpenStore(dir + "/x.db");
  ASSERT_TRUE(AddEvent(*store, "before").ok());
  // Each write adds two events in one transaction: a snapshot holds an even number.
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop) {
      EXPECT_TRUE(store
                      ->WriteAndWait([](Db& db) {
                        if (absl::Status s =
                                InsertEvent(db, 2, xmod::v1::EVENT_RUNS_ADDED, 0, 0, "a");
                            !s.ok())
                          return s;
                        return InsertEvent(db, 2, xmod::v1::EVENT_RUNS_ADDED, 0, 0, "b");
                      })
                      .ok());
    }
  });
  absl::StatusOr<BackupInfo> info =
      store->ReadValue([&](Db& db) { return WriteBackup(db, dir + "/backup.db"); });
  stop = true;
  writer.join();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->schema_version, kSchemaVersion);
  EXPECT_EQ(info->sha256, *Sha256File(dir + "/backup.db"));
  EXPECT_EQ(info->bytes, static_cast<int64_t>(std::filesystem::file_size(dir + "/backup.db")));
  EXPECT_EQ(Cell(dir + "/backup.db", "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(Cell(dir + "/backup.db", "SELECT COUNT(*) FROM events WHERE text = 'before'"), "1");
  EXPECT_EQ(Cell(dir + "/backup.db", "SELECT COUNT(*) % 2 FROM events WHERE text <> 'before'"),
            "0");
  // A file of its own: not in WAL mode, nothing beside it.
  EXPECT_EQ(Cell(dir + "/backup.db", "PRAGMA journal_mode"), "delete");
  EXPECT_FALSE(std::filesystem::exists(dir + "/backup.db-wal"));
  // Never over an existing file.
  absl::StatusOr<BackupInfo> again =
      store->ReadValue([&](Db& db) { return WriteBackup(db, dir + "/backup.db"); });
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
}

TEST(DbBackupTest, WhatIsNotABackupIsRefusedNamingWhy) {
  const std::string dir = NewTestDir("not_backup");
  ASSERT_TRUE(WriteFileAtomic(dir + "/text.db", std::string(8192, 'x')).ok());
  EXPECT_EQ(CheckBackup(dir + "/text.db").status().code(), absl::StatusCode::kInvalidArgument);
  { std::unique_ptr<Store> store = OpenStore(dir + "/newer.db"); }
  {
    absl::StatusOr<std::unique_ptr<Db>> db =
        Db::Open(dir + "/newer.db", SQLITE_OPEN_READWRITE, 1000);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA user_version = 99").ok());
  }
  absl::StatusOr<BackupInfo> newer = CheckBackup(dir + "/newer.db");
  EXPECT_EQ(newer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(newer.status().message().find("schema version 99"), std::string::npos)
      << newer.status();
  EXPECT_EQ(CheckBackup(dir + "/missing.db").status().code(), absl::StatusCode::kUnavailable);
}

TEST(DbBackupTest, ARestorePutsTheBackupInPlaceAndKeepsWhatWasThere) {
  const std::string dir = NewTestDir("restore");
  const std::string path = dir + "/x.db";
  {
    std::unique_ptr<Store> store = OpenStore(path);
    ASSERT_TRUE(AddEvent(*store, "in the backup").ok());
    ASSERT_TRUE(store->ReadValue([&](Db& db) { return WriteBackup(db, dir + "/backup.db"); }).ok());
    ASSERT_TRUE(AddEvent(*store, "after the backup").ok());
  }
  // A refused backup changes nothing.
  ASSERT_TRUE(WriteFileAtomic(dir + "/junk.db", std::string(8192, 'x')).ok());
  EXPECT_FALSE(RestoreDatabase(dir + "/junk.db", path, 5).ok());
  EXPECT_EQ(Cell(path, "SELECT COUNT(*) FROM events"), "2");

  absl::StatusOr<BackupInfo> restored = RestoreDatabase(dir + "/backup.db", path, 7);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(Cell(path, "SELECT group_concat(text) FROM events"), "in the backup");
  EXPECT_EQ(*Sha256File(path), restored->sha256);
  const std::string aside = path + ".before-restore-7";
  ASSERT_TRUE(std::filesystem::exists(aside));
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  // The replaced database, with its WAL beside it, still holds everything it had.
  EXPECT_EQ(Cell(aside, "SELECT COUNT(*) FROM events"), "2");
  // A coordinator opens the restored database as usual.
  std::unique_ptr<Store> reopened = OpenStore(path);
  ASSERT_NE(reopened, nullptr);
  EXPECT_TRUE(AddEvent(*reopened, "after the restore").ok());
}

}  // namespace
}  // namespace xmod
