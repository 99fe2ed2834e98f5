// Law-guided design in the coordinator (docs/adaptive-design.md): the live matched-FLOP Δ
// and early stopping (SweepMonitor), and decisions (AdaptiveController, ProposeRuns):
// validation with field paths, stored decisions, queued proposals; and SubmitSweep's one
// expansion of a spec (the seed set itself: seeding_test.cc).
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coordinator/adaptive/adaptive_controller.h"
#include "coordinator/adaptive/sweep_monitor.h"
#include "coordinator/api/coordinator_service.h"
#include "coordinator/api/user_queries.h"
#include "coordinator/fitting/studies.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/store/change_feed.h"
#include "coordinator/store/design_store.h"
#include "coordinator/store/store.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "grpcpp/server_context.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using testing::HasSubstr;

class DesignTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("design");
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir_ + "/x.db", StoreOptions{});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    SchedulerOptions options;
    options.checkpoint_root = dir_ + "/ckpt";
    ingest_ = std::make_unique<MetricIngest>(store_.get(), &feed_, nullptr, 8);
    absl::StatusOr<std::unique_ptr<Scheduler>> s =
        Scheduler::Create(store_.get(), &clock_, &feed_, nullptr, ingest_.get(), options);
    ASSERT_TRUE(s.ok()) << s.status();
    scheduler_ = *std::move(s);
  }

  // Submits `spec`'s runs (all of them); returns them with their ids.
  std::vector<xmod::v1::Run> Submit(const xmod::v1::SweepSpec& spec, int64_t* sweep_id) {
    absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
    EXPECT_TRUE(runs.ok()) << runs.status();
    absl::StatusOr<int64_t> id = scheduler_->SubmitSweep(spec, &*runs);
    EXPECT_TRUE(id.ok()) << id.status();
    *sweep_id = *id;
    return *runs;
  }

  // Registers a worker with `slots` CPU slots and leases every queued run to it.
  void LeaseAll(int slots) {
    absl::StatusOr<xmod::v1::RegisterResponse> r = scheduler_->Register(CpuWorker("w", slots));
    ASSERT_TRUE(r.ok()) << r.status();
    worker_id_ = r->worker_id();
    for (int i = 0; i < slots; ++i)
      ASSERT_TRUE(AcquireNow(*scheduler_, worker_id_, {i}).has_value());
  }

  // Reports val/loss points (flops, loss) for attempt 1 of `run_id`.
  void ReportValLoss(int64_t run_id, const std::vector<std::pair<double, double>>& points) {
    xmod::v1::ReportMetricsRequest request;
    request.set_worker_id(worker_id_);
    request.set_run_id(run_id);
    request.set_attempt(1);
    request.set_first_seq(0);
    int step = 0;
    for (const auto& [flops, loss] : points) {
      xmod::v1::MetricPoint* p = request.add_points();
      p->set_step(++step);
      p->set_tokens(step * 128);
      p->set_flops(flops);
      p->set_name("val/loss");
      p->set_value(loss);
    }
    absl::StatusOr<xmod::v1::ReportMetricsResponse> r = ingest_->ReportMetrics(request);
    ASSERT_TRUE(r.ok()) << r.status();
  }

  xmod::v1::Run Load(int64_t run_id) { return StoredRun(*store_, run_id); }
  // The sweep's stored decisions, newest first, as the ListDecisions RPC answers them.
  absl::StatusOr<std::vector<xmod::v1::DesignDecision>> Decisions(int64_t sweep_id, int limit) {
    xmod::v1::ListDecisionsRequest request;
    request.set_sweep_id(sweep_id);
    request.set_limit(limit);
    absl::StatusOr<xmod::v1::ListDecisionsResponse> listed = ListDecisions(*store_, request);
    if (!listed.ok()) return listed.status();
    return std::vector<xmod::v1::DesignDecision>(listed->decisions().begin(),
                                                 listed->decisions().end());
  }

  std::string dir_;
  FakeClock clock_;
  ChangeFeed feed_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<MetricIngest> ingest_;  // outlives the scheduler
  std::unique_ptr<Scheduler> scheduler_;
  int64_t worker_id_ = 0;
};

TEST_F(DesignTest, LiveDeltaIsStoredAndServedAndALaggingRunIsStoppedEarly) {
  xmod::v1::SweepSpec spec = TinySweep(dir_);  // DENSE, XMOD K=2, XMOD K=4
  spec.mutable_early_stopping()->set_enabled(true);
  spec.mutable_early_stopping()->set_after_fraction(0.5);
  spec.mutable_early_stopping()->set_margin(0.05);
  int64_t sweep_id = 0;
  std::vector<xmod::v1::Run> runs = Submit(spec, &sweep_id);
  ASSERT_EQ(runs.size(), 3u);
  LeaseAll(3);
  const double budget = spec.training().flop_budget();
  // Dense, K=2 (0.02 behind) and K=4 (0.30 behind) at 30% and 60% of the budget.
  ReportValLoss(runs[0].id(), {{0.3 * budget, 4.0}, {0.6 * budget, 3.5}});
  ReportValLoss(runs[1].id(), {{0.3 * budget, 4.02}, {0.6 * budget, 3.52}});
  ReportValLoss(runs[2].id(), {{0.3 * budget, 4.3}, {0.6 * budget, 3.8}});

  std::vector<std::pair<int64_t, std::string>> stopped;
  SweepMonitor monitor(
      store_.get(), &feed_, nullptr,
      [&](int64_t run_id, double flops, double live_delta, const std::string& reason) {
        stopped.emplace_back(run_id, reason);
        return scheduler_->StopEarly(run_id, flops, live_delta, reason);
      });
  ASSERT_TRUE(monitor.Poll().ok());

  const xmod::v1::Run k2 = Load(runs[1].id());
  ASSERT_TRUE(k2.progress().has_live_delta());
  EXPECT_NEAR(k2.progress().live_delta(), 0.02, 1e-9);
  EXPECT_DOUBLE_EQ(k2.progress().live_delta_flops(), 0.6 * budget);
  EXPECT_EQ(k2.state(), xmod::v1::RUNNING);
  EXPECT_FALSE(Load(runs[0].id()).progress().has_live_delta());  // the dense run has none

  // K=4 trails the best configuration (K=2) by 0.28 > 0.05 past half its budget.
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0].first, runs[2].id());
  EXPECT_THAT(stopped[0].second, HasSubstr("stopped early"));
  const xmod::v1::Run k4 = Load(runs[2].id());
  EXPECT_EQ(k4.state(), xmod::v1::CANCELLED);
  EXPECT_TRUE(k4.censored());
  EXPECT_THAT(k4.error(), HasSubstr("worse than"));

  // The series, as GetMetrics serves it, at the val/loss points' steps.
  absl::Status read = store_->Read([&](Db& db) {
    absl::StatusOr<std::vector<xmod::v1::MetricSeries>> series =
        LoadMetrics(db, runs[1].id(), {"delta/live"}, 100);
    if (!series.ok()) return series.status();
    EXPECT_EQ(series->size(), 1u);
    if (series->size() == 1) {
      EXPECT_EQ((*series)[0].name(), "delta/live");
      EXPECT_EQ((*series)[0].points_size(), 2);
      if ((*series)[0].points_size() == 2) {
        EXPECT_EQ((*series)[0].points(1).step(), 2);
        EXPECT_NEAR((*series)[0].points(1).value(), 0.02, 1e-9);
      }
    }
    absl::StatusOr<Stmt> censored = db.Prepare("SELECT flops, live_delta FROM censored_runs");
    if (!censored.ok()) return censored.status();
    absl::StatusOr<bool> row = censored->Step();
    EXPECT_TRUE(row.ok() && *row);
    EXPECT_DOUBLE_EQ(censored->Double(0), 0.6 * budget);
    EXPECT_NEAR(censored->Double(1), 0.3, 1e-9);
    return absl::OkStatus();
  });
  EXPECT_TRUE(read.ok()) << read;
}

TEST_F(DesignTest, ADenseReferenceBehindTheSparseRunGivesNoDeltaYet) {
  xmod::v1::SweepSpec spec = TinySweep(dir_);
  int64_t sweep_id = 0;
  std::vector<xmod::v1::Run> runs = Submit(spec, &sweep_id);
  LeaseAll(3);
  const double budget = spec.training().flop_budget();
  ReportValLoss(runs[0].id(), {{0.3 * budget, 4.0}});
  ReportValLoss(runs[1].id(), {{0.6 * budget, 3.6}});
  SweepMonitor monitor(store_.get(), &feed_, nullptr,
                       [](int64_t, double, double, const std::string&) {
                         return absl::InternalError("early stopping is off");
                       });
  ASSERT_TRUE(monitor.Update(sweep_id).ok());
  EXPECT_FALSE(Load(runs[1].id()).progress().has_live_delta());
}

TEST_F(DesignTest, ProposeRunsStoresOnlyWhatItSubmits) {
  xmod::v1::SweepSpec spec = AdaptiveTinySweep(dir_);
  spec.clear_adaptive();  // a sweep proposals are asked for by hand
  xmod::v1::SweepSpec seed_spec = spec;
  int64_t sweep_id = 0;
  // The sweep starts with nothing but one dense run.
  seed_spec.mutable_grids(0)->clear_ks();
  seed_spec.mutable_grids(0)->add_ks(1);
  seed_spec.mutable_grids(0)->clear_seq_lens();
  seed_spec.mutable_grids(0)->add_seq_lens(64);
  absl::StatusOr<std::vector<xmod::v1::Run>> first = ExpandSweep(seed_spec);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<int64_t> id = scheduler_->SubmitSweep(spec, &*first);
  ASSERT_TRUE(id.ok()) << id.status();
  sweep_id = *id;
  AdaptiveController controller(store_.get(), scheduler_.get(), &feed_, &clock_, nullptr);

  xmod::v1::ProposeRunsRequest ask;
  ask.set_sweep_id(sweep_id);
  ask.set_count(3);
  absl::StatusOr<xmod::v1::DesignDecision> none = controller.Propose(ask);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("targets"));
  ask.add_targets()->set_flops(-5);
  EXPECT_THAT(controller.Propose(ask).status().message(), HasSubstr("targets[0].flops"));
  ask.clear_targets();
  *ask.add_targets() = AdaptiveTinySweep(dir_).adaptive().targets(0);
  ask.set_count(-1);
  EXPECT_THAT(controller.Propose(ask).status().message(), HasSubstr("count"));
  ask.set_count(3);

  // Before any run succeeded there is no fit: the proposals are the seed set's runs.
  absl::StatusOr<xmod::v1::DesignDecision> look = controller.Propose(ask);
  ASSERT_TRUE(look.ok()) << look.status();
  EXPECT_FALSE(look->fit_error().empty());
  EXPECT_EQ(look->proposals_size(), 3);
  EXPECT_EQ(look->source(), "propose");
  for (const auto& p : look->proposals()) EXPECT_EQ(p.run_id(), 0);

  ask.set_submit(true);
  absl::StatusOr<xmod::v1::DesignDecision> submitted = controller.Propose(ask);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  int queued = 0;
  for (const auto& p : submitted->proposals()) {
    if (p.run_id() == 0) continue;
    ++queued;
    const xmod::v1::Run run = Load(p.run_id());
    EXPECT_EQ(run.state(), xmod::v1::QUEUED);
    EXPECT_EQ(run.sweep_id(), sweep_id);
    EXPECT_EQ(run.spec().training().seq_len(), p.seq_len());
  }
  EXPECT_GE(queued, 1);

  absl::StatusOr<std::vector<xmod::v1::DesignDecision>> stored = Decisions(sweep_id, 10);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 1u);  // the look stored nothing
  EXPECT_EQ(look->id(), 0);
  EXPECT_EQ((*stored)[0].id(), submitted->id());  // with the run ids
  EXPECT_EQ((*stored)[0].proposals(0).run_id(), submitted->proposals(0).run_id());
  EXPECT_EQ(Decisions(sweep_id + 100, 10).status().code(), absl::StatusCode::kNotFound);

  // A cancelled sweep takes no more runs, and stores no decision that says it did.
  ASSERT_TRUE(scheduler_->CancelSweep(sweep_id, kTestActor).ok());
  EXPECT_EQ(controller.Propose(ask).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Decisions(sweep_id, 10)->size(), 1u);
}

TEST_F(DesignTest, ProposalsUnderAStudysFitComeFromTheNamedMemberSweep) {
  xmod::v1::SweepSpec spec = AdaptiveTinySweep(dir_);
  spec.clear_adaptive();
  // Two empty sweeps over the same candidate space.
  std::vector<int64_t> sweeps;
  for (int i = 0; i < 2; ++i) {
    std::vector<xmod::v1::Run> no_runs;
    absl::StatusOr<int64_t> id = scheduler_->SubmitSweep(spec, &no_runs);
    ASSERT_TRUE(id.ok()) << id.status();
    sweeps.push_back(*id);
  }
  const int64_t first = sweeps[0];
  const int64_t second = sweeps[1];
  xmod::v1::StudySpec study;
  study.set_name("pair");
  for (int64_t sweep : {first, second}) {
    xmod::v1::StudyMember* m = study.add_members();
    m->set_sweep_id(sweep);
    m->set_role(sweep == first ? "kxl" : "axk");
  }
  absl::Status stored = store_->WriteAndWait(
      [&](Db& db) { return InsertStudy(db, study, "", 100, clock_.NowMillis()).status(); });
  ASSERT_TRUE(stored.ok()) << stored;
  AdaptiveController controller(store_.get(), scheduler_.get(), &feed_, &clock_, nullptr);
  xmod::v1::ProposeRunsRequest ask;
  ask.set_study("pair");
  *ask.add_targets() = AdaptiveTinySweep(dir_).adaptive().targets(0);
  ask.set_count(2);
  EXPECT_THAT(controller.Propose(ask).status().message(), HasSubstr("sweep_id: name the member"));
  ask.set_sweep_id(second + 1);
  EXPECT_FALSE(controller.Propose(ask).ok());
  ask.set_sweep_id(second);
  ask.set_submit(true);
  absl::StatusOr<xmod::v1::DesignDecision> decision = controller.Propose(ask);
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_EQ(decision->study(), "pair");
  EXPECT_EQ(decision->sweep_id(), second);
  for (const auto& p : decision->proposals()) {
    if (p.run_id() != 0) EXPECT_EQ(Load(p.run_id()).sweep_id(), second);
  }
  ASSERT_TRUE(Decisions(second, 1).ok());
  EXPECT_TRUE(Decisions(first, 1)->empty());
  ask.set_study("no-such-study");
  EXPECT_EQ(controller.Propose(ask).status().code(), absl::StatusCode::kNotFound);
}

// SubmitSweep expands a spec once: the runs it stores, and for an adaptive design the seed
// set and the candidate space, all come from that one expansion (SweepExpansionCount).
TEST_F(DesignTest, SubmitSweepExpandsTheSpecOnce) {
  CoordinatorServiceOptions options;
  options.check_data_paths = false;
  options.clock = &clock_;
  CoordinatorService service(store_.get(), scheduler_.get(), &feed_, nullptr, options);
  // The expansions one SubmitSweep of `spec` makes, and the runs it answered.
  const auto submit = [&](const xmod::v1::SweepSpec& spec, bool dry_run, int* runs) {
    xmod::v1::SubmitSweepRequest request;
    *request.mutable_spec() = spec;
    request.set_dry_run(dry_run);
    xmod::v1::SubmitSweepResponse response;
    grpc::ServerContext context;
    const int64_t before = SweepExpansionCount();
    grpc::Status status = service.SubmitSweep(&context, &request, &response);
    const int64_t expansions = SweepExpansionCount() - before;
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.sweep_id() > 0, !dry_run);
    *runs = response.runs_size();
    return expansions;
  };
  int runs = 0;
  EXPECT_EQ(submit(TinySweep(dir_), /*dry_run=*/false, &runs), 1);
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(submit(TinySweep(dir_), /*dry_run=*/true, &runs), 1);

  const xmod::v1::SweepSpec adaptive = AdaptiveTinySweep(dir_);
  absl::StatusOr<std::vector<xmod::v1::Run>> grids = ExpandSweep(adaptive);
  ASSERT_TRUE(grids.ok()) << grids.status();
  EXPECT_EQ(submit(adaptive, /*dry_run=*/false, &runs), 1);
  EXPECT_GT(runs, 0);
  EXPECT_LT(static_cast<size_t>(runs), grids->size());  // only the seed set is queued
  EXPECT_EQ(submit(adaptive, /*dry_run=*/true, &runs), 1);
}

}  // namespace
}  // namespace xmod
