// xmod-fit --db against a real results database: the schema the coordinator migrates to
// (resultsdb/schema.h) filled with a synthetic sweep, read back through the
// flop_aligned_loss view and fitted.
#include "fitter/db_source.h"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "fitter/fit_command.h"
#include "fitter/sweep_fit.h"
#include "fitter/synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "resultsdb/schema.h"
#include "resultsdb/sqlite_db.h"

namespace xmod::fitter {
namespace {

using ::testing::HasSubstr;

std::string DbPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/xmod_fitter_" + name + ".db";
  std::remove(path.c_str());
  return path;
}

// Writes `runs` as sweep 1 (SUCCEEDED) plus one RUNNING run that must be ignored.
void WriteSweep(const std::string& path, const std::vector<RunCurve>& runs) {
  absl::StatusOr<std::unique_ptr<Db>> db =
      Db::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, 1000);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE(Migrate(**db).ok());
  ASSERT_TRUE((*db)->Exec("BEGIN").ok());
  ASSERT_TRUE(
      (*db)->Exec("INSERT INTO sweeps (id, name, spec, created_ms) VALUES (1, 's', x'', 0)").ok());
  auto add_run = [&](const RunCurve& r, const char* state) {
    absl::StatusOr<Stmt> ins = (*db)->Prepare(
        "INSERT INTO runs (id, sweep_id, name, arch, k, a, seq_len, backbone, flop_budget, "
        "forward_flops_per_token, total_params, held_out, state, max_attempts, spec, "
        "created_ms, label) VALUES (?, 1, ?, ?, ?, ?, ?, ?, 1e19, 1, 1, ?, ?, 5, x'', 0, ?)");
    ASSERT_TRUE(ins.ok()) << ins.status();
    ins->Bind(1, r.run_id).Bind(2, r.name).Bind(3, xmod::v1::Architecture_Name(r.arch));
    ins->Bind(4, r.k).Bind(5, r.a).Bind(6, r.seq_len).Bind(7, r.backbone);
    ins->Bind(8, r.held_out ? 1 : 0).Bind(9, state).Bind(10, r.label);
    ASSERT_TRUE(ins->Step().ok());
    for (size_t i = 0; i < r.points.size(); ++i) {
      absl::StatusOr<Stmt> m = (*db)->Prepare(
          "INSERT INTO metrics (run_id, attempt, seq, step, tokens, flops, name, value) "
          "VALUES (?, 1, ?, ?, 0, ?, 'val/loss', ?)");
      ASSERT_TRUE(m.ok());
      m->Bind(1, r.run_id).Bind(2, static_cast<int64_t>(i)).Bind(3, static_cast<int64_t>(i));
      m->Bind(4, r.points[i].flops).Bind(5, r.points[i].loss);
      ASSERT_TRUE(m->Step().ok());
    }
  };
  for (const RunCurve& r : runs) add_run(r, "SUCCEEDED");
  RunCurve partial = runs.back();
  partial.run_id = 100000;
  partial.name = "still-running";
  partial.points.resize(2);
  add_run(partial, "RUNNING");
  ASSERT_TRUE((*db)->Exec("COMMIT").ok());
}

TEST(DbSourceTest, FitsASweepFromTheCoordinatorDatabase) {
  SyntheticOptions so;
  so.seed = 3;
  so.out_of_range = true;
  const std::vector<RunCurve> runs = RunCurvesFor(*PaperSweepObservations(so));
  const std::string path = DbPath("sweep");
  WriteSweep(path, runs);

  absl::StatusOr<std::vector<RunCurve>> loaded = LoadSweepRuns(path, 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), runs.size());  // the RUNNING run is not read
  EXPECT_EQ((*loaded)[0].arch, runs[0].arch);
  EXPECT_EQ((*loaded)[1].points.size(), runs[1].points.size());

  SweepFitOptions opt;
  opt.cross_validate = false;
  absl::StatusOr<FitReport> report = FitSweep(*loaded, opt);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->fit.n_obs, 109);
  EXPECT_EQ(report->out_of_range.n, 9);
  EXPECT_GE(report->fit.r2, 0.98);

  FitCommandOptions cmd;
  cmd.db = path;
  cmd.sweep = 1;
  cmd.output = "json";
  cmd.cross_validate = false;
  cmd.recommend = {"5e18,2048,556e6"};
  std::ostringstream out;
  ASSERT_TRUE(RunFitCommand(cmd, out).ok());
  EXPECT_THAT(out.str(), HasSubstr("\"loss\": "));  // a dense curve covers C
}

// The grid labels of the stored runs name their B.4 sweeps: one sweep with grids labelled
// kxl, nact and axk is fitted by sweep (B.5), its axk rows with their own offset.
TEST(DbSourceTest, GridLabelsNameTheSweepsOfTheFit) {
  SyntheticOptions so;
  so.seed = 4;
  so.sweep_roles = true;
  so.axk_shift = 0.03;
  const std::vector<RunCurve> runs = RunCurvesFor(*PaperSweepObservations(so));
  const std::string path = DbPath("roles");
  WriteSweep(path, runs);
  absl::StatusOr<std::vector<RunCurve>> loaded = LoadSweepRuns(path, 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::set<std::string> labels;
  for (const RunCurve& r : *loaded) labels.insert(r.label);
  EXPECT_EQ(labels, (std::set<std::string>{"", "kxl", "nact", "axk"}));  // "": dense runs

  SweepFitOptions opt;
  opt.cross_validate = false;
  absl::StatusOr<FitReport> report = FitSweep(*loaded, opt);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->fit.by_sweep);
  EXPECT_EQ(report->fit.n_stage2, 24);  // A x K, its A = 1 rows included
  EXPECT_NEAR(report->fit.e_stage2 - report->fit.params.e, 0.03, 0.01);
}

TEST(DbSourceTest, MissingSweepAndMissingDenseReference) {
  SyntheticOptions so;
  std::vector<RunCurve> runs = RunCurvesFor(*PaperSweepObservations(so));
  runs.erase(runs.begin());  // dense L=2048 556M
  const std::string path = DbPath("nodense");
  WriteSweep(path, runs);
  EXPECT_EQ(LoadSweepRuns(path, 2).status().code(), absl::StatusCode::kNotFound);
  FitCommandOptions cmd;
  cmd.db = path;
  cmd.sweep = 1;
  std::ostringstream out;
  const absl::Status s = RunFitCommand(cmd, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("group L=2048 backbone=556M"));
  EXPECT_THAT(s.message(), HasSubstr("no dense reference"));
}

}  // namespace
}  // namespace xmod::fitter
