// Run progress as the store hands it to every reader (coordinator/store/run_progress.h): a
// run that took the last whole step its budget buys reads 100% although it spent less than
// the budget (issue 22: succeeded runs showed 99%), and a running run reads its share of the
// planned steps.
#include "coordinator/store/run_progress.h"

#include <vector>

#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/store/store.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/store_writes.h"
#include "coordinator/tests/test_util.h"
#include "gtest/gtest.h"
#include "model/accounting/accounting.h"

namespace xmod {
namespace {

// The X-MoD K = 4 run of the tiny sweep with a budget of 399.5 steps: it trains 399.
xmod::v1::Run ShortBudgetRun(const std::string& dir, double* step_flops) {
  xmod::v1::SweepSpec spec = TinySweep(dir);
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
  EXPECT_TRUE(runs.ok()) << runs.status();
  xmod::v1::Run run = runs->back();
  *step_flops = run.forward_flops_per_token() * kDefaultTrainFlopsMultiplier *
                static_cast<double>(run.spec().training().batch_tokens());
  const double budget = 399.5 * *step_flops;
  run.mutable_spec()->mutable_training()->set_flop_budget(budget);
  run.mutable_progress()->set_flop_budget(budget);
  return run;
}

TEST(RunProgressTest, SucceededRunAtTheLastWholeStepReadsOneAndRunningRunItsShare) {
  const std::string dir = NewTestDir("progress");
  double step_flops = 0;
  const xmod::v1::Run planned = ShortBudgetRun(dir, &step_flops);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir + "/x.db", StoreOptions{});
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<int64_t> ids;
  ASSERT_TRUE((*store)
                  ->WriteAndWait([&](Db& db) {
                    absl::StatusOr<int64_t> sweep = InsertSweep(db, TinySweep(dir), "", 1);
                    if (!sweep.ok()) return sweep.status();
                    for (int64_t steps : {399, 133}) {
                      absl::StatusOr<int64_t> id = InsertRun(db, *sweep, planned, 1);
                      if (!id.ok()) return id.status();
                      ids.push_back(*id);
                      xmod::v1::Progress progress;
                      progress.set_step(steps);
                      progress.set_flops(static_cast<double>(steps) * step_flops);
                      if (auto s = UpdateProgress(db, *id, progress); !s.ok()) return s;
                    }
                    RunUpdate succeeded;
                    succeeded.run_id = ids[0];
                    succeeded.state = xmod::v1::SUCCEEDED;
                    RunUpdate running;
                    running.run_id = ids[1];
                    running.state = xmod::v1::RUNNING;
                    if (auto s = UpdateRun(db, succeeded); !s.ok()) return s;
                    return UpdateRun(db, running);
                  })
                  .ok());
  ASSERT_TRUE((*store)
                  ->Read([&](Db& db) {
                    absl::StatusOr<xmod::v1::Run> done = LoadRun(db, ids[0]);
                    absl::StatusOr<xmod::v1::Run> going = LoadRun(db, ids[1]);
                    EXPECT_TRUE(done.ok() && going.ok());
                    if (!done.ok() || !going.ok()) return absl::OkStatus();
                    EXPECT_EQ(done->progress().planned_steps(), 399);
                    EXPECT_LT(done->progress().flops(), done->progress().flop_budget());
                    EXPECT_EQ(done->progress().fraction(), 1.0);
                    EXPECT_EQ(going->progress().planned_steps(), 399);
                    EXPECT_NEAR(going->progress().fraction(), 133.0 / 399, 1e-12);
                    return absl::OkStatus();
                  })
                  .ok());
}

TEST(RunProgressTest, UnknownAccountingFallsBackToTheBudgetAndClamps) {
  xmod::v1::Run run;
  run.set_state(xmod::v1::RUNNING);
  run.mutable_progress()->set_flop_budget(1e12);
  run.mutable_progress()->set_flops(2.5e11);
  CompleteProgress(&run);  // no forward_flops_per_token: steps unknown
  EXPECT_EQ(run.progress().planned_steps(), 0);
  EXPECT_DOUBLE_EQ(run.progress().fraction(), 0.25);
  run.mutable_progress()->set_flops(3e12);
  CompleteProgress(&run);
  EXPECT_EQ(run.progress().fraction(), 1.0);
  run.mutable_progress()->set_flop_budget(0);
  run.mutable_progress()->set_flops(5);
  CompleteProgress(&run);
  EXPECT_EQ(run.progress().fraction(), 0.0);
}

}  // namespace
}  // namespace xmod
