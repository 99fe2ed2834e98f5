// Backup and restore as an operator does them (docs/operations.md, "Backup"), with real
// processes: xmod-coordinator with credentials, two xmod-worker processes of one CPU slot each
// and worker/fake_train as their trainer (a train/loss point of 5/step every 40 ms;
// FAKE_TRAIN_RESUME=1 continues after the checkpoint it resumes from).
//   - While a sweep trains, `xmodctl admin backup FILE` with an admin token writes a checked
//     backup (integrity_check ok, its SHA-256 as announced); a user token is refused and
//     writes nothing.
//   - The cluster is stopped and `xmod-coordinator --restore_from=FILE` puts the backup in the
//     database's place (the database it replaces moved aside, not deleted).
//   - Restarted on it, the sweep goes on: every run ends SUCCEEDED with train/loss at every
//     step exactly once and the fault-free final loss.
// No assertion is on timing: states are waited for with deadlines.
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/poll.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster.h"
#include "tests/integration/test_db.h"

namespace xmod {
namespace {

constexpr int kSteps = 100;
constexpr int kRuns = 4;

int64_t Count(ReadOnlyDb& db, const std::string& sql) {
  const std::vector<std::vector<std::string>> rows = db.Rows(sql);
  return rows.empty() || rows[0].empty() || rows[0][0].empty() ? -1 : std::stoll(rows[0][0]);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

class BackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Cluster::UseFakeTrainer(XMOD_FAKE_TRAIN, kSteps, 40);
    ASSERT_TRUE(
        cluster_.WriteCredentials({"admin ops", "user alice", "worker w1", "worker w2"}).ok());
    data_ = cluster_.dir() + "/unused_shard.bin";
    ASSERT_TRUE(WriteFileAtomic(data_, "").ok());
  }
  void TearDown() override { cluster_.Stop(); }

  std::string TokenFile(const std::string& name) const { return cluster_.TokenFile(name); }

  void Start() {
    ASSERT_TRUE(cluster_
                    .StartCoordinator({"--nocheck_data_paths", cluster_.CredentialsFlag(),
                                       "--heartbeat_interval_ms=300", "--lease_ttl_ms=3000"})
                    .ok())
        << cluster_.Logs();
    for (const char* w : {"w1", "w2"}) {
      ASSERT_TRUE(cluster_.StartWorker(w, 1, {"--token_file=" + TokenFile(w)}).ok())
          << cluster_.Logs();
    }
  }

  // xmodctl ARGS... with `user`'s token: how it ended and what it printed.
  Cluster::CommandResult Xmodctl(const std::string& user, std::vector<std::string> args) {
    absl::StatusOr<int> port = cluster_.CoordinatorPort("grpc");
    EXPECT_TRUE(port.ok()) << port.status();
    args.insert(args.begin(), {BinaryPath("xmodctl", "XMOD_XMODCTL_BIN"), "--addr",
                               absl::StrCat("127.0.0.1:", port.value_or(0))});
    absl::StatusOr<Cluster::CommandResult> result =
        cluster_.RunCommand("xmodctl", args, {{"XMOD_TOKEN_FILE", TokenFile(user)}});
    EXPECT_TRUE(result.ok()) << result.status();
    return result.value_or(Cluster::CommandResult{});
  }

  int64_t Submit() {
    return cluster_.SubmitAs("alice", Cluster::TinyDenseSweep("backed-up", kRuns, data_))
        .sweep_id();
  }

  Cluster cluster_;
  std::string data_;
};

TEST_F(BackupTest, ABackupTakenWhileASweepTrainsRestoresAndTheSweepGoesOn) {
  Start();
  const int64_t sweep = Submit();
  ASSERT_GT(sweep, 0);
  {
    // Two runs training, past step 20: the backup holds runs mid-flight.
    ReadOnlyDb db(cluster_.db_path());
    ASSERT_TRUE(PollUntil(
        [&] {
          return Count(db,
                       "SELECT COUNT(DISTINCT m.run_id) FROM metrics m JOIN attempts a USING "
                       "(run_id, attempt) WHERE a.ended_ms IS NULL AND m.step >= 20") == 2;
        },
        absl::Seconds(60), absl::Milliseconds(50)))
        << cluster_.Logs();
  }
  const std::string backup = cluster_.dir() + "/xmod-backup.db";
  const Cluster::CommandResult refused = Xmodctl("alice", {"admin", "backup", backup});
  EXPECT_EQ(refused.exit.code, 1) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, "admin only")) << refused.output;
  EXPECT_FALSE(Exists(backup));
  const Cluster::CommandResult taken = Xmodctl("ops", {"-o", "json", "admin", "backup", backup});
  ASSERT_EQ(taken.exit.code, 0) << taken.output << cluster_.Logs();
  absl::StatusOr<std::string> sha256 = Sha256File(backup);
  ASSERT_TRUE(sha256.ok()) << sha256.status();
  EXPECT_TRUE(absl::StrContains(taken.output, *sha256)) << taken.output;
  {
    ReadOnlyDb copy(backup);
    EXPECT_EQ(copy.Rows("PRAGMA integrity_check")[0][0], "ok");
    EXPECT_EQ(Count(copy, "SELECT COUNT(*) FROM runs"), kRuns);
  }

  // The cluster goes down; the backup takes the database's place.
  cluster_.Stop();
  absl::StatusOr<Cluster::CommandResult> restored =
      cluster_.RunCommand("restore", {BinaryPath("xmod-coordinator", "XMOD_COORDINATOR_BIN"),
                                      "--db=" + cluster_.db_path(), "--restore_from=" + backup});
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_EQ(restored->exit.code, 0) << restored->output;
  EXPECT_TRUE(absl::StrContains(restored->output, "restored " + backup)) << restored->output;
  bool moved_aside = false;
  for (const auto& entry : std::filesystem::directory_iterator(cluster_.dir())) {
    moved_aside |= absl::StrContains(entry.path().filename().string(), ".db.before-restore-");
  }
  EXPECT_TRUE(moved_aside) << "the replaced database was not kept";

  // Back up on the restored database: the sweep goes on to the end.
  Start();
  ReadOnlyDb db(cluster_.db_path());
  ASSERT_TRUE(PollUntil(
      [&] {
        return Count(db, absl::StrCat("SELECT COUNT(*) FROM runs WHERE sweep_id = ", sweep,
                                      " AND state IN ('QUEUED', 'RUNNING')")) == 0;
      },
      absl::Minutes(4), absl::Milliseconds(100)))
      << cluster_.Logs();
  EXPECT_EQ(Count(db, "SELECT COUNT(*) FROM runs WHERE state = 'SUCCEEDED'"), kRuns);
  for (const auto& row : db.Rows("SELECT id FROM runs")) {
    const std::string points =
        absl::StrCat(" FROM canonical_metrics WHERE run_id = ", row[0], " AND name = 'train/loss'");
    EXPECT_EQ(Count(db, "SELECT COUNT(*)" + points), kSteps) << "run " << row[0];
    EXPECT_EQ(Count(db, "SELECT COUNT(DISTINCT step)" + points), kSteps) << "run " << row[0];
    const std::vector<ReadOnlyDb::Row> last =
        db.Values("SELECT value" + points + " ORDER BY step DESC LIMIT 1");
    ASSERT_EQ(last.size(), 1u) << "run " << row[0];
    EXPECT_EQ(last[0].number[0], 5.0 / kSteps) << "run " << row[0];
  }
}

}  // namespace
}  // namespace xmod
