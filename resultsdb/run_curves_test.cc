// LoadSucceededRunCurves: succeeded runs only, with their canonical val/loss points by
// FLOPs; NULL A reads as unset; NaN stays NaN; missing sweeps, files and schemas are named.
#include "resultsdb/run_curves.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "resultsdb/schema.h"

namespace xmod {
namespace {

std::string DbPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/xmod_curves_" + name + ".db";
  std::remove(path.c_str());
  return path;
}

// Sweep 1: run 1 DENSE (A NULL), run 2 XMOD K=2 A=0.5 with N0 = 3 in its spec, both
// SUCCEEDED; run 3 RUNNING. Run 2's first attempt was superseded by a fresh start.
void WriteSweep(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Db>> db =
      Db::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, 1000);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE(Migrate(**db).ok());
  xmod::v1::RunSpec spec;
  spec.mutable_model()->set_n0(3);
  absl::StatusOr<Stmt> insert = (*db)->Prepare(
      "INSERT INTO runs (id, sweep_id, label, name, arch, k, a, seq_len, backbone, flop_budget,"
      " forward_flops_per_token, total_params, held_out, state, max_attempts, spec, created_ms)"
      " VALUES (?, 1, ?, ?, ?, ?, ?, 64, 'tiny', 1e12, 1, 1, ?, ?, 5, ?, 0)");
  ASSERT_TRUE(insert.ok()) << insert.status();
  ASSERT_TRUE(
      (*db)->Exec("INSERT INTO sweeps (id, name, spec, created_ms) VALUES (1, 's', x'', 0)").ok());
  insert->Bind(1, 1).Bind(2, "").Bind(3, "dense").Bind(4, "DENSE").Bind(5, 1).BindNull(6);
  insert->Bind(7, 0).Bind(8, "SUCCEEDED").BindBlob(9, "");
  ASSERT_TRUE(insert->Run().ok());
  insert->Reset();
  insert->Bind(1, 2).Bind(2, "kxl").Bind(3, "xmod").Bind(4, "XMOD").Bind(5, 2).Bind(6, 0.5);
  insert->Bind(7, 1).Bind(8, "SUCCEEDED").BindBlob(9, spec.SerializeAsString());
  ASSERT_TRUE(insert->Run().ok());
  insert->Reset();
  insert->Bind(1, 3).Bind(2, "").Bind(3, "running").Bind(4, "XMOD").Bind(5, 4).Bind(6, 1.0);
  insert->Bind(7, 0).Bind(8, "RUNNING").BindBlob(9, "");
  ASSERT_TRUE(insert->Run().ok());
  ASSERT_TRUE((*db)
                  ->Exec(R"sql(
INSERT INTO attempts (run_id, attempt, worker_id, worker, started_ms, lease_expires_ms,
                      resumed_from_step)
VALUES (2, 1, 1, 'w', 1, 2, 0), (2, 2, 1, 'w', 3, 4, 0);
INSERT INTO metrics (run_id, attempt, seq, step, tokens, flops, name, value) VALUES
  (1, 1, 1, 1, 1, 2e9, 'val/loss', 5.0), (1, 1, 2, 2, 2, 1e9, 'val/loss', 6.0),
  (1, 1, 3, 2, 2, 1e9, 'train/loss', 7.0),
  (2, 1, 1, 1, 1, 1e9, 'val/loss', 9.0),
  (2, 2, 1, 1, 1, 1e9, 'val/loss', 'NaN'), (2, 2, 2, 2, 2, 2e9, 'val/loss', 4.5),
  (3, 1, 1, 1, 1, 1e9, 'val/loss', 8.0);
)sql")
                  .ok());
}

TEST(RunCurvesTest, ReadsSucceededRunsWithTheirCanonicalCurves) {
  const std::string path = DbPath("sweep");
  WriteSweep(path);
  absl::StatusOr<std::vector<StoredRunCurve>> runs = LoadSucceededRunCurves(path, 1);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);  // the RUNNING run is not read

  const StoredRunCurve& dense = (*runs)[0];
  EXPECT_EQ(dense.run_id, 1);
  EXPECT_EQ(dense.arch, xmod::v1::DENSE);
  EXPECT_FALSE(dense.a.has_value());  // stored NULL
  EXPECT_FALSE(dense.n0.has_value());
  ASSERT_EQ(dense.points.size(), 2u);  // val/loss only, ordered by FLOPs
  EXPECT_EQ(dense.points[0].flops, 1e9);
  EXPECT_EQ(dense.points[0].loss, 6.0);
  EXPECT_EQ(dense.points[1].loss, 5.0);

  const StoredRunCurve& xmod = (*runs)[1];
  EXPECT_EQ(xmod.name, "xmod");
  EXPECT_EQ(xmod.label, "kxl");
  EXPECT_EQ(xmod.k, 2);
  EXPECT_EQ(xmod.a, 0.5);
  EXPECT_EQ(xmod.n0, 3);
  EXPECT_TRUE(xmod.held_out);
  ASSERT_EQ(xmod.points.size(), 2u);  // attempt 1's point is superseded
  EXPECT_TRUE(std::isnan(xmod.points[0].loss));
  EXPECT_EQ(xmod.points[1].loss, 4.5);
}

TEST(RunCurvesTest, ReadsRunsOfTheStatesAsked) {
  const std::string path = DbPath("states");
  WriteSweep(path);
  absl::StatusOr<std::unique_ptr<Db>> db = Db::OpenReadOnly(path, 1000);
  ASSERT_TRUE(db.ok()) << db.status();
  absl::StatusOr<std::vector<StoredRunCurve>> all = LoadRunCurves(**db, 1, {});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].state, xmod::v1::RUNNING);
  EXPECT_EQ((*all)[2].flop_budget, 1e12);
  EXPECT_EQ((*all)[2].points.size(), 1u);
  absl::StatusOr<std::vector<StoredRunCurve>> running = LoadRunCurves(**db, 1, {xmod::v1::RUNNING});
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_EQ(running->size(), 1u);
  EXPECT_EQ(running->front().run_id, 3);
}

TEST(RunCurvesTest, NamesWhatIsMissing) {
  const std::string path = DbPath("missing");
  WriteSweep(path);
  absl::StatusOr<std::vector<StoredRunCurve>> none = LoadSucceededRunCurves(path, 2);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("sweep 2"), absl::string_view::npos);

  EXPECT_EQ(LoadSucceededRunCurves(DbPath("no_such_file"), 1).status().code(),
            absl::StatusCode::kNotFound);

  const std::string empty = DbPath("empty");
  { ASSERT_TRUE(Db::Open(empty, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, 1000).ok()); }
  absl::StatusOr<std::vector<StoredRunCurve>> unversioned = LoadSucceededRunCurves(empty, 1);
  EXPECT_EQ(unversioned.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(unversioned.status().message().find("not an xmod results database"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace xmod
