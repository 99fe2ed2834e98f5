// Schema tests: a database left at version 2 (0 and '' for missing values) upgrades to the
// current version without losing a row, its placeholders turned into NULL and every real
// value kept; the views work on the rebuilt tables; a version-5 database's gang attempts
// ("a,b" / "0;0" strings) become attempt_members rows; bad target versions are refused.
#include "resultsdb/schema.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace xmod {
namespace {

std::string DbPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/xmod_schema_" + name + ".db";
  std::remove(path.c_str());
  return path;
}

std::unique_ptr<Db> OpenNew(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Db>> db =
      Db::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, 1000);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? *std::move(db) : nullptr;
}

// The first column of the first row as text, "NULL" for NULL, "none" without a row.
std::string Cell(Db& db, const std::string& sql) {
  absl::StatusOr<Stmt> stmt = db.Prepare(sql);
  EXPECT_TRUE(stmt.ok()) << stmt.status();
  if (!stmt.ok()) return "error";
  absl::StatusOr<bool> row = stmt->Step();
  EXPECT_TRUE(row.ok()) << row.status();
  if (!row.ok() || !*row) return "none";
  return stmt->IsNull(0) ? "NULL" : stmt->Text(0);
}

// Rows as a version-2 coordinator wrote them: runs 1 (DENSE, never started), 2 (XMOD,
// succeeded) and 3 (MOE, running); attempts open, lost, failed and succeeded; fits of a
// sweep (ok and failed) and of a study.
constexpr const char* kVersion2Rows = R"sql(
INSERT INTO sweeps (id, name, spec, created_ms) VALUES (1, 's', x'', 10);
INSERT INTO studies (id, name, spec, created_ms) VALUES (1, 'b4', x'', 20);
INSERT INTO runs (id, sweep_id, name, arch, k, a, seq_len, backbone, moe, flop_budget,
                  forward_flops_per_token, total_params, state, max_attempts, spec,
                  created_ms, started_ms, finished_ms, train_loss, val_loss,
                  tokens_per_second)
VALUES (1, 1, 'dense', 'DENSE', 1, 0, 64, 'tiny', '', 1e12, 1, 1, 'QUEUED', 5, x'', 10,
        0, 0, 0, 0, 0),
       (2, 1, 'xmod', 'XMOD', 2, 1, 64, 'tiny', '', 1e12, 1, 1, 'SUCCEEDED', 5, x'', 10,
        100, 200, 5.5, 5.25, 1000),
       (3, 1, 'moe', 'MOE', 1, 0, 64, 'tiny', '2:8+1', 1e12, 1, 1, 'RUNNING', 5, x'', 10,
        300, 0, 6.5, 0, 900);
INSERT INTO attempts (run_id, attempt, worker_id, worker, started_ms, ended_ms, outcome,
                      exit_code, resumed_from_step, lease_expires_ms)
VALUES (2, 1, 1, 'w', 100, 150, 'lost', 0, 0, 160),
       (2, 2, 1, 'w', 150, 170, 'failed', 4, 0, 180),
       (2, 3, 1, 'w', 170, 200, 'succeeded', 0, 0, 210),
       (3, 1, 1, 'w', 300, 0, 'running', 0, 0, 400);
INSERT INTO metrics (run_id, attempt, seq, step, tokens, flops, name, value)
VALUES (2, 3, 1, 10, 640, 1e11, 'val/loss', 5.5), (2, 3, 2, 20, 1280, 2e11, 'val/loss', 5.25);
INSERT INTO fits (id, sweep_id, created_ms, params, r2, rmse, mae, n_obs, cv, fit, error,
                  study_id)
VALUES (1, 1, 300, '{"e":1}', 0.9, 0.1, 0.05, 7, '[{"n":7}]', x'08', '', NULL),
       (2, 1, 400, '{}', NULL, NULL, NULL, 0, '[]', NULL, 'too few runs', NULL),
       (3, 0, 500, '{"e":2}', 0.8, 0.2, 0.1, 9, '[]', x'08', '', 1);
)sql";

TEST(SchemaTest, Version2DatabaseUpgradesWithMissingValuesAsNull) {
  auto db = OpenNew(DbPath("v2"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(MigrateTo(*db, 2).ok());
  ASSERT_TRUE(db->Exec(kVersion2Rows).ok());

  ASSERT_TRUE(Migrate(*db).ok());
  EXPECT_EQ(*SchemaVersion(*db), kSchemaVersion);
  EXPECT_EQ(Cell(*db, "SELECT COUNT(*) FROM runs"), "3");
  EXPECT_EQ(Cell(*db, "SELECT COUNT(*) FROM attempts"), "4");
  EXPECT_EQ(Cell(*db, "SELECT COUNT(*) FROM fits"), "3");

  // A run never started: no start, end, losses or throughput; DENSE has no A, no MoE.
  for (const char* column :
       {"started_ms", "finished_ms", "train_loss", "val_loss", "tokens_per_second", "a", "moe"}) {
    EXPECT_EQ(Cell(*db, std::string("SELECT ") + column + " IS NULL FROM runs WHERE id = 1"), "1")
        << column;
  }
  // Real values stay.
  EXPECT_EQ(Cell(*db, "SELECT started_ms FROM runs WHERE id = 2"), "100");
  EXPECT_EQ(Cell(*db, "SELECT finished_ms FROM runs WHERE id = 2"), "200");
  EXPECT_EQ(Cell(*db, "SELECT val_loss FROM runs WHERE id = 2"), "5.25");
  EXPECT_EQ(Cell(*db, "SELECT a FROM runs WHERE id = 2"), "1.0");
  EXPECT_EQ(Cell(*db, "SELECT moe FROM runs WHERE id = 3"), "2:8+1");
  EXPECT_EQ(Cell(*db, "SELECT finished_ms IS NULL FROM runs WHERE id = 3"), "1");
  EXPECT_EQ(Cell(*db, "SELECT val_loss IS NULL FROM runs WHERE id = 3"), "1");
  EXPECT_EQ(Cell(*db, "SELECT train_loss FROM runs WHERE id = 3"), "6.5");

  // Attempts: open has no end and no exit code, lost has no exit code; exits 4 and 0 stay.
  EXPECT_EQ(Cell(*db,
                 "SELECT ended_ms IS NULL AND exit_code IS NULL FROM attempts"
                 " WHERE run_id = 3 AND attempt = 1"),
            "1");
  EXPECT_EQ(Cell(*db, "SELECT exit_code IS NULL FROM attempts WHERE run_id = 2 AND attempt = 1"),
            "1");
  EXPECT_EQ(Cell(*db, "SELECT ended_ms FROM attempts WHERE run_id = 2 AND attempt = 1"), "150");
  EXPECT_EQ(Cell(*db, "SELECT exit_code FROM attempts WHERE run_id = 2 AND attempt = 2"), "4");
  EXPECT_EQ(Cell(*db, "SELECT exit_code FROM attempts WHERE run_id = 2 AND attempt = 3"), "0");

  // Fits: a failed fit has no params, n_obs or cv; a study's fit no sweep.
  EXPECT_EQ(Cell(*db,
                 "SELECT params IS NULL AND n_obs IS NULL AND cv IS NULL FROM fits"
                 " WHERE id = 2"),
            "1");
  EXPECT_EQ(Cell(*db, "SELECT error FROM fits WHERE id = 2"), "too few runs");
  EXPECT_EQ(Cell(*db, "SELECT sweep_id IS NULL FROM fits WHERE id = 3"), "1");
  EXPECT_EQ(Cell(*db, "SELECT study_id FROM fits WHERE id = 3"), "1");
  EXPECT_EQ(Cell(*db, "SELECT params || ' ' || n_obs || ' ' || cv FROM fits WHERE id = 1"),
            "{\"e\":1} 7 [{\"n\":7}]");

  // The views are back, over the rebuilt tables.
  EXPECT_EQ(Cell(*db, "SELECT COUNT(*) FROM flop_aligned_loss WHERE run_id = 2"), "2");
  EXPECT_EQ(Cell(*db, "SELECT final_val_loss FROM run_summary WHERE run_id = 2"), "5.25");
  EXPECT_EQ(Cell(*db, "SELECT a IS NULL FROM run_summary WHERE run_id = 1"), "1");
  // So are the indexes.
  EXPECT_EQ(Cell(*db,
                 "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name IN"
                 " ('runs_by_sweep', 'runs_by_state', 'fits_by_sweep', 'fits_by_study')"),
            "4");
}

// Attempts as a version-5 coordinator wrote them: run 1's gang on workers a and b (member 0
// a, two slots each), then a single-worker attempt on b, and an attempt of a worker whose
// row is gone.
constexpr const char* kVersion5Attempts = R"sql(
INSERT INTO sweeps (id, name, spec, created_ms) VALUES (1, 's', x'', 10);
INSERT INTO runs (id, sweep_id, name, arch, k, seq_len, backbone, flop_budget,
                  forward_flops_per_token, total_params, state, max_attempts, spec,
                  created_ms)
VALUES (1, 1, 'gang', 'DENSE', 1, 64, 'tiny', 1e12, 1, 1, 'RUNNING', 5, x'', 10);
INSERT INTO workers (id, name, slots, registered_ms, last_seen_ms)
VALUES (4, 'a', x'', 10, 10), (7, 'b', x'', 10, 10);
INSERT INTO attempts (run_id, attempt, worker_id, worker, slots, started_ms, outcome,
                      lease_expires_ms, rendezvous)
VALUES (1, 1, 4, 'a,b', '0,1;1,0', 100, 'running', 200, 'tcp://a:29500'),
       (1, 2, 7, 'b', '0', 100, 'running', 200, NULL),
       (1, 3, 9, 'gone,c', '3;', 100, 'running', 200, NULL);
)sql";

// The rows of attempt_members as "attempt.member worker_id worker slots" lines.
std::string Members(Db& db) {
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "SELECT attempt, member, IFNULL(worker_id, 'NULL'), worker, slots FROM attempt_members"
      " WHERE run_id = 1 ORDER BY attempt, member");
  EXPECT_TRUE(stmt.ok()) << stmt.status();
  if (!stmt.ok()) return "error";
  std::string out;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    EXPECT_TRUE(row.ok()) << row.status();
    if (!row.ok() || !*row) break;
    out += stmt->Text(0) + "." + stmt->Text(1) + " " + stmt->Text(2) + " " + stmt->Text(3) + " " +
           stmt->Text(4) + "\n";
  }
  return out;
}

TEST(SchemaTest, Version5GangAttemptsUpgradeToMemberRows) {
  auto db = OpenNew(DbPath("v5"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(MigrateTo(*db, 5).ok());
  ASSERT_TRUE(db->Exec(kVersion5Attempts).ok());

  ASSERT_TRUE(Migrate(*db).ok());
  EXPECT_EQ(*SchemaVersion(*db), kSchemaVersion);
  // Member 0's id is the attempt's worker_id; the others' are looked up by name (NULL when
  // no worker has it). Slots become JSON arrays.
  EXPECT_EQ(Members(*db),
            "1.0 4 a [0,1]\n"
            "1.1 7 b [1,0]\n"
            "2.0 7 b [0]\n"
            "3.0 9 gone [3]\n"
            "3.1 NULL c []\n");
  // The slots read back one per row, in order.
  EXPECT_EQ(Cell(*db,
                 "SELECT group_concat(s.value, ' ') FROM attempt_members m, json_each(m.slots) s"
                 " WHERE m.run_id = 1 AND m.attempt = 1 AND m.member = 1"),
            "1 0");
  // The attempts rows are left as they were.
  EXPECT_EQ(Cell(*db, "SELECT worker || ' ' || slots FROM attempts WHERE attempt = 1"),
            "a,b 0,1;1,0");
}

TEST(SchemaTest, Version8RowsKeepTheirOwnersAndGainNoActor) {
  auto db = OpenNew(DbPath("v8"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(MigrateTo(*db, 8).ok());
  ASSERT_TRUE(db->Exec(R"sql(
INSERT INTO sweeps (id, name, spec, created_ms, submitter) VALUES (1, 's', x'', 1, 'alice');
INSERT INTO events (time_ms, kind, sweep_id, text) VALUES (2, 'sweep_submitted', 1, 's');
INSERT INTO studies (id, name, spec, created_ms) VALUES (1, 'b4', x'', 3);
)sql")
                  .ok());

  ASSERT_TRUE(Migrate(*db).ok());
  EXPECT_EQ(*SchemaVersion(*db), kSchemaVersion);
  // The sweep is still alice's; who made the change and who created the study were never
  // recorded: NULL, not a name.
  EXPECT_EQ(Cell(*db, "SELECT submitter FROM sweeps WHERE id = 1"), "alice");
  EXPECT_EQ(Cell(*db, "SELECT actor IS NULL FROM events"), "1");
  EXPECT_EQ(Cell(*db, "SELECT owner IS NULL FROM studies"), "1");
  EXPECT_EQ(Cell(*db,
                 "SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_master"
                 " WHERE type = 'index' AND tbl_name = 'events' ORDER BY name)"),
            "events_by_actor events_by_run events_by_sweep");
}

TEST(SchemaTest, MissingValuesMayBeNullInAFreshDatabase) {
  auto db = OpenNew(DbPath("fresh"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(Migrate(*db).ok());
  for (const auto& [table, column] :
       std::vector<std::pair<std::string, std::string>>{{"runs", "started_ms"},
                                                        {"runs", "finished_ms"},
                                                        {"runs", "train_loss"},
                                                        {"runs", "val_loss"},
                                                        {"runs", "a"},
                                                        {"runs", "moe"},
                                                        {"attempts", "ended_ms"},
                                                        {"attempts", "exit_code"},
                                                        {"fits", "sweep_id"},
                                                        {"fits", "params"},
                                                        {"fits", "n_obs"},
                                                        {"fits", "cv"}}) {
    EXPECT_EQ(Cell(*db, "SELECT \"notnull\" FROM pragma_table_info('" + table +
                            "') WHERE name = '" + column + "'"),
              "0")
        << table << "." << column;
  }
}

TEST(SchemaTest, RefusesBadTargetsAndNewerDatabases) {
  auto db = OpenNew(DbPath("targets"));
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(MigrateTo(*db, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MigrateTo(*db, kSchemaVersion + 1).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Migrate(*db).ok());
  EXPECT_EQ(MigrateTo(*db, 2).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*SchemaVersion(*db), kSchemaVersion);  // nothing changed
}

}  // namespace
}  // namespace xmod
