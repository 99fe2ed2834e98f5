// The fit trigger on a real (temporary) store: sweeps whose val/loss curves are drawn from
// the paper's Table 8 law (fitter/synthetic.h) are fitted once their runs succeed, and the
// fit is served by GetFit / Predict / Recommend over gRPC and by the HTTP API. Bad input
// (a NaN loss) stores no successful fit; a sweep still missing data stores nothing; many
// completions during a fit coalesce into one more fit; a restart refits only what is owed.
#include "coordinator/fitting/fit_trigger.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <httplib.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "coordinator/coordinator.h"
#include "coordinator/fitting/fit_queries.h"
#include "coordinator/fitting/studies.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/store_writes.h"
#include "coordinator/tests/test_util.h"
#include "fitter/law.h"
#include "fitter/synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

xmod::v1::SweepSpec FitSpec(bool enabled) {
  xmod::v1::SweepSpec spec;
  spec.set_name("law");
  spec.mutable_fit()->set_enabled(enabled);
  spec.mutable_fit()->set_seed(7);
  return spec;
}

// Synthetic run curves: the whole Appendix B.4 design (109 observations), or only its
// K×L sweep at 556M, A = 1 (56 observations; a fast one-stage fit).
std::vector<fitter::RunCurve> PaperRuns(bool k_by_l_only) {
  fitter::SyntheticOptions options;
  options.seed = 11;
  absl::StatusOr<std::vector<fitter::Observation>> obs = fitter::PaperSweepObservations(options);
  EXPECT_TRUE(obs.ok()) << obs.status();
  std::vector<fitter::Observation> kept;
  for (const fitter::Observation& o : *obs) {
    if (!k_by_l_only || (o.backbone == "556M" && o.a == 1)) kept.push_back(o);
  }
  return fitter::RunCurvesFor(kept);
}

// Stores a sweep and its runs (QUEUED) with their val/loss curves; returns the run ids in
// the order of `runs`.
int64_t AddSweep(Store& store, const xmod::v1::SweepSpec& spec,
                 const std::vector<fitter::RunCurve>& runs, std::vector<int64_t>* ids) {
  int64_t sweep_id = 0;
  ids->clear();
  absl::Status s = store.WriteAndWait([&](Db& db) -> absl::Status {
    absl::StatusOr<int64_t> sweep = InsertSweep(db, spec, "", 1000);
    if (!sweep.ok()) return sweep.status();
    sweep_id = *sweep;
    for (const fitter::RunCurve& curve : runs) {
      xmod::v1::Run run;
      run.set_name(curve.name);
      run.set_label(curve.label);
      run.set_held_out(curve.held_out);
      run.set_max_attempts(5);
      xmod::v1::ModelSpec* model = run.mutable_spec()->mutable_model();
      model->set_arch(curve.arch);
      model->mutable_backbone()->set_name(curve.backbone);
      model->set_k(curve.arch == xmod::v1::DENSE ? 1 : curve.k);
      model->set_a(curve.arch == xmod::v1::DENSE ? 1 : curve.a);
      run.mutable_spec()->mutable_training()->set_seq_len(curve.seq_len);
      run.mutable_spec()->mutable_training()->set_flop_budget(1e19);
      absl::StatusOr<int64_t> id = InsertRun(db, sweep_id, run, 1000);
      if (!id.ok()) return id.status();
      ids->push_back(*id);
      std::vector<xmod::v1::MetricPoint> points;
      for (size_t i = 0; i < curve.points.size(); ++i) {
        xmod::v1::MetricPoint p;
        p.set_step(static_cast<int64_t>(i + 1));
        p.set_flops(curve.points[i].flops);
        p.set_name("val/loss");
        p.set_value(curve.points[i].loss);
        points.push_back(p);
      }
      if (absl::Status m = InsertMetrics(db, *id, 1, 0, points); !m.ok()) return m;
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  return sweep_id;
}

void SetState(Store& store, const std::vector<int64_t>& ids, xmod::v1::RunState state,
              int64_t finished_ms) {
  absl::Status s = store.WriteAndWait([&](Db& db) {
    for (int64_t id : ids) {
      RunUpdate u;
      u.run_id = id;
      u.state = state;
      u.finished_ms = finished_ms;
      if (absl::Status e = UpdateRun(db, u); !e.ok()) return e;
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
}

// Rows of the fits table of a sweep: successful ones or failed ones.
int CountFits(Store& store, int64_t sweep_id, bool failed) {
  int n = -1;
  absl::Status s = store.Read([&](Db& db) {
    absl::StatusOr<Stmt> stmt = db.Prepare(absl::StrCat(
        "SELECT COUNT(*) FROM fits WHERE sweep_id = ? AND error ", failed ? "<> ''" : "= ''"));
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, sweep_id);
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    n = static_cast<int>(stmt->Int(0));
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  return n;
}

double CounterValue(prometheus::Registry& registry, const std::string& result) {
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != "xmod_fits_total") continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      for (const prometheus::ClientMetric::Label& label : m.label) {
        if (label.name == "result" && label.value == result) return m.counter.value;
      }
    }
  }
  return -1;
}

// Small DE sizes and no cross-validation: these tests check the plumbing, not the fitter.
FitTriggerOptions FastOptions() {
  FitTriggerOptions options;
  options.fit.fit.search.population = 16;
  options.fit.fit.search.generations = 80;
  options.fit.cross_validate = false;
  return options;
}

class FitTriggerTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("fit");
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir_ + "/x.db", StoreOptions());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  std::string dir_;
  FakeClock clock_;
  prometheus::Registry registry_;
  std::unique_ptr<Store> store_;
};

// One sweep whose grids are labelled kxl, nact and axk (the B.4 design in one spec) is
// fitted by sweep (paper B.5): the grid labels stored with the runs name each run's sweep.
// The axk runs at A = 1 are stored at the nact runs' budget and seed: the same configurations,
// so each pair is one observation in both roles (109, not 113). The N_act = 165M fold scores
// the 11 nact runs, not the axk sweep's other runs.
TEST_F(FitTriggerTest, GridLabelsNameTheSweepsOfTheFit) {
  fitter::SyntheticOptions options;
  options.seed = 5;
  options.sweep_roles = true;
  options.axk_shift = 0.03;
  const std::vector<fitter::RunCurve> runs =
      fitter::RunCurvesFor(*fitter::PaperSweepObservations(options));
  std::vector<int64_t> ids;
  const int64_t sweep = AddSweep(*store_, FitSpec(true), runs, &ids);
  SetState(*store_, ids, xmod::v1::SUCCEEDED, 2000);
  FitTriggerOptions fit_options = FastOptions();
  fit_options.fit.cross_validate = true;
  FitTrigger trigger(store_.get(), &clock_, &registry_, fit_options);
  trigger.RequestFit(sweep);
  trigger.WaitIdle();
  absl::StatusOr<xmod::v1::Fit> fit = LatestUsableFit(*store_, sweep);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->n_obs(), 109);
  int n_165m = -1;
  for (const xmod::v1::GroupError& g : fit->cv()) {
    if (g.group() == "N_act=165M") n_165m = g.n();
  }
  EXPECT_EQ(n_165m, 11);
}

TEST_F(FitTriggerTest, NanLossStoresAnErrorAndNoSuccessfulFit) {
  std::vector<fitter::RunCurve> runs = PaperRuns(/*k_by_l_only=*/true);
  runs[3].points[5].loss = std::numeric_limits<double>::quiet_NaN();
  const std::string bad_run = runs[3].name;
  std::vector<int64_t> ids;
  const int64_t sweep = AddSweep(*store_, FitSpec(true), runs, &ids);
  SetState(*store_, ids, xmod::v1::SUCCEEDED, 2000);

  // The NaN point is stored, not dropped.
  absl::Status read = store_->Read([&](Db& db) {
    absl::StatusOr<std::vector<xmod::v1::MetricSeries>> series =
        LoadMetrics(db, ids[3], {"val/loss"}, 100);
    if (!series.ok()) return series.status();
    EXPECT_EQ(series->at(0).points_size(), 8);
    EXPECT_TRUE(std::isnan(series->at(0).points(5).value()));
    return absl::OkStatus();
  });
  ASSERT_TRUE(read.ok()) << read;

  FitTrigger trigger(store_.get(), &clock_, &registry_, FastOptions());
  trigger.RequestFit(sweep);
  trigger.WaitIdle();
  EXPECT_EQ(trigger.attempts(), 1);
  EXPECT_EQ(CountFits(*store_, sweep, /*failed=*/false), 0);
  EXPECT_EQ(CountFits(*store_, sweep, /*failed=*/true), 1);
  EXPECT_EQ(CounterValue(registry_, "ok"), 0);
  EXPECT_EQ(CounterValue(registry_, "error"), 1);
  absl::StatusOr<xmod::v1::Fit> fit = LatestUsableFit(*store_, sweep);
  EXPECT_EQ(fit.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(fit.status().message(), HasSubstr(absl::StrCat("no fit yet for sweep ", sweep,
                                                             "; the latest attempt failed: ")));
  EXPECT_THAT(fit.status().message(), HasSubstr(bad_run));
}

TEST_F(FitTriggerTest, AFailureAfterASuccessKeepsServingThePreviousFit) {
  std::vector<fitter::RunCurve> runs = PaperRuns(/*k_by_l_only=*/true);
  fitter::RunCurve extra = runs.back();
  extra.name = "late-nan";
  extra.points[2].loss = std::numeric_limits<double>::infinity();
  std::vector<int64_t> ids;
  const int64_t sweep = AddSweep(*store_, FitSpec(true), runs, &ids);
  SetState(*store_, ids, xmod::v1::SUCCEEDED, 2000);
  FitTrigger trigger(store_.get(), &clock_, &registry_, FastOptions());
  trigger.RequestFit(sweep);
  trigger.WaitIdle();
  absl::StatusOr<xmod::v1::Fit> good = LatestUsableFit(*store_, sweep);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->n_obs(), 56);
  EXPECT_GE(good->r2(), 0.95);
  EXPECT_EQ(good->error(), "");

  // A run with an infinite loss joins the sweep (as a second sweep's run would not).
  absl::Status s = store_->WriteAndWait([&](Db& db) -> absl::Status {
    xmod::v1::Run run;
    run.set_name(extra.name);
    run.set_max_attempts(5);
    run.mutable_spec()->mutable_model()->set_arch(xmod::v1::XMOD);
    run.mutable_spec()->mutable_model()->mutable_backbone()->set_name(extra.backbone);
    run.mutable_spec()->mutable_model()->set_k(extra.k);
    run.mutable_spec()->mutable_model()->set_a(extra.a);
    run.mutable_spec()->mutable_training()->set_seq_len(extra.seq_len);
    absl::StatusOr<int64_t> id = InsertRun(db, sweep, run, 3000);
    if (!id.ok()) return id.status();
    std::vector<xmod::v1::MetricPoint> points;
    for (const fitter::CurvePoint& c : extra.points) {
      xmod::v1::MetricPoint p;
      p.set_flops(c.flops);
      p.set_name("val/loss");
      p.set_value(c.loss);
      points.push_back(p);
    }
    if (absl::Status m = InsertMetrics(db, *id, 1, 0, points); !m.ok()) return m;
    RunUpdate u;
    u.run_id = *id;
    u.state = xmod::v1::SUCCEEDED;
    return UpdateRun(db, u);
  });
  ASSERT_TRUE(s.ok()) << s;
  trigger.RequestFit(sweep);
  trigger.WaitIdle();
  EXPECT_EQ(CountFits(*store_, sweep, /*failed=*/false), 1);
  EXPECT_EQ(CountFits(*store_, sweep, /*failed=*/true), 1);
  absl::StatusOr<xmod::v1::Fit> served = LatestUsableFit(*store_, sweep);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->id(), good->id());
  EXPECT_EQ(served->params().e(), good->params().e());
  EXPECT_THAT(served->error(), HasSubstr("late-nan"));
}

TEST_F(FitTriggerTest, MissingDataStoresNothingWhileTheSweepRunsAndAnErrorOnceItEnds) {
  const std::vector<fitter::RunCurve> runs = PaperRuns(/*k_by_l_only=*/true);
  std::vector<int64_t> ids;
  const int64_t sweep = AddSweep(*store_, FitSpec(true), runs, &ids);
  int64_t dense_2048 = 0;
  std::vector<int64_t> sparse_2048, others;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].seq_len != 2048) {
      others.push_back(ids[i]);
    } else if (runs[i].arch == xmod::v1::DENSE) {
      dense_2048 = ids[i];
    } else {
      sparse_2048.push_back(ids[i]);
    }
  }
  ASSERT_NE(dense_2048, 0);
  ASSERT_EQ(sparse_2048.size(), 12u);

  // Only sparse runs without their dense reference have succeeded: not enough data yet.
  SetState(*store_, sparse_2048, xmod::v1::SUCCEEDED, 2000);
  FitTrigger trigger(store_.get(), &clock_, &registry_, FastOptions());
  trigger.RequestFit(sweep);
  trigger.WaitIdle();
  EXPECT_EQ(trigger.attempts(), 1);
  EXPECT_EQ(CountFits(*store_, sweep, /*failed=*/false), 0);
  EXPECT_EQ(CountFits(*store_, sweep, /*failed=*/true), 0);
  EXPECT_EQ(CounterValue(registry_, "error"), 0);

  // The other L complete while L = 2048's reference still trains: a provisional fit of the
  // complete groups.
  SetState(*store_, others, xmod::v1::SUCCEEDED, 3000);
  trigger.RequestFit(sweep);
  trigger.WaitIdle();
  absl::StatusOr<xmod::v1::Fit> provisional = LatestUsableFit(*store_, sweep);
  ASSERT_TRUE(provisional.ok()) << provisional.status();
  EXPECT_EQ(provisional->n_obs(), 56 - 12);

  // The reference fails for good: the sweep is over and the gap is final, an error naming
  // the group is stored; the provisional fit is still served, with the error.
  SetState(*store_, {dense_2048}, xmod::v1::FAILED, 4000);
  trigger.RequestFit(sweep);
  trigger.WaitIdle();
  EXPECT_EQ(CountFits(*store_, sweep, /*failed=*/false), 1);
  EXPECT_EQ(CountFits(*store_, sweep, /*failed=*/true), 1);
  EXPECT_EQ(CounterValue(registry_, "error"), 1);
  absl::StatusOr<xmod::v1::Fit> served = LatestUsableFit(*store_, sweep);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->id(), provisional->id());
  EXPECT_THAT(served->error(), HasSubstr("group L=2048 backbone=556M"));
}

TEST_F(FitTriggerTest, CompletionsDuringAFitCoalesceIntoOneMoreFit) {
  std::vector<int64_t> ids;
  const int64_t a = AddSweep(*store_, FitSpec(true), PaperRuns(true), &ids);
  SetState(*store_, ids, xmod::v1::SUCCEEDED, 2000);
  const int64_t b = AddSweep(*store_, FitSpec(true), PaperRuns(true), &ids);
  SetState(*store_, ids, xmod::v1::SUCCEEDED, 2000);

  absl::Notification entered;
  absl::Notification release;
  FitTriggerOptions options = FastOptions();
  options.TEST_before_fit = [&](int64_t) {
    if (!entered.HasBeenNotified()) {
      entered.Notify();
      release.WaitForNotification();
    }
  };
  FitTrigger trigger(store_.get(), &clock_, &registry_, options);
  trigger.RequestFit(a);
  entered.WaitForNotification();  // the first fit of `a` is running (held in the hook)
  for (int i = 0; i < 20; ++i) trigger.RequestFit(a);
  for (int i = 0; i < 5; ++i) trigger.RequestFit(b);
  release.Notify();
  trigger.WaitIdle();
  EXPECT_EQ(trigger.attempts(), 3);  // a, b, and exactly one more of a
  EXPECT_EQ(CountFits(*store_, a, /*failed=*/false), 2);
  EXPECT_EQ(CountFits(*store_, b, /*failed=*/false), 1);
  EXPECT_EQ(CounterValue(registry_, "ok"), 3);
}

// A fit with a long bootstrap (10000 refits, minutes) is stopped by CancelFit, and by
// Shutdown; a cancelled fit stores nothing.
TEST_F(FitTriggerTest, CancelFitAndShutdownStopARunningBootstrap) {
  xmod::v1::SweepSpec spec = FitSpec(true);
  spec.mutable_fit()->set_bootstrap_samples(10000);
  std::vector<int64_t> ids;
  const int64_t a = AddSweep(*store_, spec, PaperRuns(true), &ids);
  SetState(*store_, ids, xmod::v1::SUCCEEDED, 2000);
  for (const bool by_shutdown : {false, true}) {
    absl::Notification entered;
    FitTriggerOptions options = FastOptions();
    options.TEST_before_fit = [&](int64_t) {
      if (!entered.HasBeenNotified()) entered.Notify();
    };
    FitTrigger trigger(store_.get(), &clock_, nullptr, options);
    trigger.RequestFit(a);
    entered.WaitForNotification();  // the fit is running
    if (by_shutdown) {
      trigger.Shutdown();
    } else {
      trigger.CancelFit(a);
      trigger.WaitIdle();
    }
    EXPECT_EQ(trigger.attempts(), 1);
    EXPECT_EQ(CountFits(*store_, a, /*failed=*/false), 0) << by_shutdown;
    EXPECT_EQ(CountFits(*store_, a, /*failed=*/true), 0) << by_shutdown;
  }
}

// A stored spec from before the bootstrap limit, asking for 2e9 refits: clamped, not
// allocated.
TEST_F(FitTriggerTest, BootstrapSamplesOfAStoredSpecAreClamped) {
  xmod::v1::SweepSpec spec = FitSpec(true);
  spec.mutable_fit()->set_bootstrap_samples(2000000000);
  std::vector<int64_t> ids;
  const int64_t a = AddSweep(*store_, spec, PaperRuns(true), &ids);
  SetState(*store_, ids, xmod::v1::SUCCEEDED, 2000);
  FitTriggerOptions options = FastOptions();
  options.max_bootstrap_samples = 4;
  FitTrigger trigger(store_.get(), &clock_, nullptr, options);
  trigger.RequestFit(a);
  trigger.WaitIdle();
  absl::StatusOr<xmod::v1::Fit> fit = LatestUsableFit(*store_, a);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_TRUE(fit->has_ci_low());
}

TEST_F(FitTriggerTest, PollRefitsOnSuccessesAndAfterARestartOnlyWhatIsOwed) {
  std::vector<int64_t> a_ids;
  const int64_t a = AddSweep(*store_, FitSpec(true), PaperRuns(true), &a_ids);
  std::vector<int64_t> off_ids;
  const int64_t off = AddSweep(*store_, FitSpec(false), PaperRuns(true), &off_ids);
  SetState(*store_, off_ids, xmod::v1::SUCCEEDED, clock_.NowMillis());
  {
    FitTrigger trigger(store_.get(), &clock_, &registry_, FastOptions());
    ASSERT_TRUE(trigger.Poll().ok());
    trigger.WaitIdle();
    EXPECT_EQ(trigger.attempts(), 0);  // nothing succeeded in `a`; `off` does not fit
    const std::vector<int64_t> failed_one = {a_ids.back()};
    SetState(*store_, failed_one, xmod::v1::FAILED, clock_.NowMillis());
    ASSERT_TRUE(trigger.Poll().ok());
    trigger.WaitIdle();
    EXPECT_EQ(trigger.attempts(), 0);  // a failed run changes nothing the fit reads
    SetState(*store_, std::vector<int64_t>(a_ids.begin(), a_ids.end() - 1), xmod::v1::SUCCEEDED,
             clock_.NowMillis());
    clock_.Advance(1000);
    ASSERT_TRUE(trigger.Poll().ok());
    trigger.WaitIdle();
    EXPECT_EQ(trigger.attempts(), 1);
    ASSERT_TRUE(trigger.Poll().ok());
    trigger.WaitIdle();
    EXPECT_EQ(trigger.attempts(), 1);  // no change, no refit
  }
  EXPECT_EQ(CountFits(*store_, a, false), 1);
  EXPECT_EQ(CountFits(*store_, off, false), 0);

  // A restart: `a` is covered by its fit; a new sweep with successes and no fit is owed one.
  std::vector<int64_t> c_ids;
  const int64_t c = AddSweep(*store_, FitSpec(true), PaperRuns(true), &c_ids);
  SetState(*store_, c_ids, xmod::v1::SUCCEEDED, clock_.NowMillis());
  FitTrigger restarted(store_.get(), &clock_, nullptr, FastOptions());
  ASSERT_TRUE(restarted.Poll().ok());
  restarted.WaitIdle();
  EXPECT_EQ(restarted.attempts(), 1);
  EXPECT_EQ(CountFits(*store_, a, false), 1);
  EXPECT_EQ(CountFits(*store_, c, false), 1);
}

// A study over three sweeps, one per B.4 role, whose runs carry no role label, each sweep
// storing the configurations it shares with another (556M at 32k; 165M, A = 1) at the same
// budget and seed: the fit counts each once, in both roles (109 = 124 - 15). Created before
// its members' runs succeed, it is fitted by sweep at the poll after they do (the members' own
// fit.enabled plays no part), served by GetFit(study), Predict and Recommend, refitted once
// when another member run succeeds; a study created after its members finished is fitted at
// the next poll; a restart owes nothing.
TEST_F(FitTriggerTest, AStudyFitsItsMemberSweepsBySweepAndRefitsAsTheyComplete) {
  fitter::SyntheticOptions synthetic;
  synthetic.seed = 5;
  synthetic.sweep_roles = true;
  synthetic.axk_shift = 0.03;
  absl::StatusOr<std::vector<fitter::Observation>> all = fitter::PaperSweepObservations(synthetic);
  ASSERT_TRUE(all.ok()) << all.status();
  xmod::v1::StudySpec study;
  study.set_name("b4");
  study.set_seed(7);
  std::vector<int64_t> early;  // every run but one
  std::vector<int64_t> late;   // an axk run that succeeds last
  for (fitter::SweepRole role :
       {fitter::SweepRole::kKxl, fitter::SweepRole::kNact, fitter::SweepRole::kAxk}) {
    std::vector<fitter::Observation> part;
    for (const fitter::Observation& o : *all) {
      if (o.InSweep(role)) part.push_back(o);
    }
    std::vector<fitter::RunCurve> runs = fitter::RunCurvesFor(part);
    for (fitter::RunCurve& run : runs) run.label = "";
    xmod::v1::SweepSpec spec = FitSpec(false);
    spec.set_name(absl::StrCat("b4-", fitter::SweepRoleName(role)));
    std::vector<int64_t> ids;
    AddSweep(*store_, spec, runs, &ids);
    if (role == fitter::SweepRole::kAxk) {
      ASSERT_TRUE(fitter::IsObservation(runs.back()));
      late = {ids.back()};
      ids.pop_back();
    }
    early.insert(early.end(), ids.begin(), ids.end());
    xmod::v1::StudyMember* member = study.add_members();
    member->set_sweep_name(spec.name());
    member->set_role(fitter::SweepRoleName(role));
  }
  const auto create = [&](const std::string& name) {
    study.set_name(name);
    absl::Status created = store_->WriteAndWait(
        [&](Db& db) { return InsertStudy(db, study, "", 100, clock_.NowMillis()).status(); });
    ASSERT_TRUE(created.ok()) << created;
  };
  create("b4");

  xmod::v1::GetFitRequest get;
  get.set_study("b4");
  {
    FitTrigger trigger(store_.get(), &clock_, &registry_, FastOptions());
    ASSERT_TRUE(trigger.Poll().ok());
    trigger.WaitIdle();
    EXPECT_EQ(trigger.attempts(), 0);  // nothing succeeded yet
    SetState(*store_, early, xmod::v1::SUCCEEDED, clock_.NowMillis());
    clock_.Advance(1000);
    ASSERT_TRUE(trigger.Poll().ok());
    trigger.WaitIdle();
    EXPECT_EQ(trigger.attempts(), 1);  // the study alone
    absl::StatusOr<xmod::v1::Fit> fit = LatestUsableFit(*store_, get);
    ASSERT_TRUE(fit.ok()) << fit.status();
    EXPECT_EQ(fit->n_obs(), 109 - 1);
    EXPECT_TRUE(fit->by_sweep());
    EXPECT_NE(fit->study_id(), 0);
    EXPECT_EQ(fit->sweep_id(), 0);
    EXPECT_NEAR(fit->e_stage2() - fit->params().e(), 0.03, 0.015);

    clock_.Advance(1000);
    ASSERT_TRUE(trigger.Poll().ok());
    trigger.WaitIdle();
    EXPECT_EQ(trigger.attempts(), 1);  // no change, no refit

    SetState(*store_, late, xmod::v1::SUCCEEDED, clock_.NowMillis());
    clock_.Advance(1000);
    ASSERT_TRUE(trigger.Poll().ok());
    trigger.WaitIdle();
    EXPECT_EQ(trigger.attempts(), 2);
    fit = LatestUsableFit(*store_, get);
    ASSERT_TRUE(fit.ok()) << fit.status();
    EXPECT_EQ(fit->n_obs(), 109);

    // Predict and Recommend under the study's fit, on the members' dense curves.
    xmod::v1::PredictRequest predict;
    predict.set_study("b4");
    xmod::v1::LawPoint* point = predict.add_points();
    point->set_flops(5e18);
    point->set_seq_len(32768);
    point->set_backbone("165M");
    point->set_k(8);
    point->set_a(2);
    absl::StatusOr<xmod::v1::PredictResponse> predicted = PredictWithLatestFit(*store_, predict);
    ASSERT_TRUE(predicted.ok()) << predicted.status();
    EXPECT_GT(predicted->predictions(0).loss(), 0);
    predict.set_sweep_id(1);
    EXPECT_EQ(PredictWithLatestFit(*store_, predict).status().code(),
              absl::StatusCode::kInvalidArgument);
    xmod::v1::RecommendRequest recommend;
    recommend.set_study("b4");
    recommend.set_flops(5e18);
    recommend.set_seq_len(32768);
    recommend.set_backbone("165M");
    EXPECT_TRUE(RecommendWithLatestFit(*store_, recommend).ok());

    create("b4-after");
    ASSERT_TRUE(trigger.Poll().ok());
    trigger.WaitIdle();
    EXPECT_EQ(trigger.attempts(), 3);
    get.set_study("b4-after");
    fit = LatestUsableFit(*store_, get);
    ASSERT_TRUE(fit.ok()) << fit.status();
    EXPECT_EQ(fit->n_obs(), 109);
  }
  FitTrigger restarted(store_.get(), &clock_, nullptr, FastOptions());
  ASSERT_TRUE(restarted.Poll().ok());
  restarted.WaitIdle();
  EXPECT_EQ(restarted.attempts(), 0);
}

// The whole coordinator: the trigger fits the paper design (both stages, grouped CV) and the
// user API serves the fit over gRPC and HTTP.
TEST(FitServingTest, GetFitPredictRecommendThroughTheCoordinator) {
  const std::string dir = NewTestDir("fitsvc");
  CoordinatorOptions options = LoopbackOptions(dir);
  options.metrics_listen = "127.0.0.1:0";
  options.tick_ms = 3'600'000;  // the test polls itself
  absl::StatusOr<std::unique_ptr<Coordinator>> started = Coordinator::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  Coordinator& coordinator = **started;
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", coordinator.ports().grpc),
                                     grpc::InsecureChannelCredentials());
  std::unique_ptr<xmod::v1::Coordinator::Stub> user = xmod::v1::Coordinator::NewStub(channel);
  const auto context = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return c;
  };

  std::vector<int64_t> ids;
  const int64_t sweep =
      AddSweep(*coordinator.store(), FitSpec(true), PaperRuns(/*k_by_l_only=*/false), &ids);
  xmod::v1::GetFitRequest get;
  get.set_sweep_id(sweep);
  xmod::v1::Fit fit;
  grpc::Status status = user->GetFit(context().get(), get, &fit);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(), absl::StrCat("no fit yet for sweep ", sweep));
  get.set_sweep_id(sweep + 100);
  EXPECT_EQ(user->GetFit(context().get(), get, &fit).error_code(), grpc::StatusCode::NOT_FOUND);
  get.set_sweep_id(sweep);

  SetState(*coordinator.store(), ids, xmod::v1::SUCCEEDED, 2000);
  ASSERT_TRUE(coordinator.fit_trigger()->Poll().ok());
  coordinator.fit_trigger()->WaitIdle();

  status = user->GetFit(context().get(), get, &fit);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(fit.sweep_id(), sweep);
  EXPECT_EQ(fit.n_obs(), 109);
  EXPECT_GE(fit.r2(), 0.98);
  EXPECT_LT(fit.rmse(), 0.006);  // the noise is σ = 0.003
  EXPECT_FALSE(fit.cv().empty());
  EXPECT_EQ(fit.error(), "");

  // Predict: Δ under the fit close to the truth; loss = dense loss at C + Δ where a dense
  // curve covers C (synthetic dense curves span 1.25e18 .. 1e19 FLOPs), else 0.
  xmod::v1::PredictRequest predict;
  predict.set_sweep_id(sweep);
  xmod::v1::LawPoint* inside = predict.add_points();
  inside->set_flops(5e18);
  inside->set_seq_len(8192);
  inside->set_backbone("556M");
  inside->set_k(8);
  inside->set_a(1);
  *predict.add_points() = *inside;
  predict.mutable_points(1)->set_flops(1e21);
  xmod::v1::PredictResponse predicted;
  status = user->Predict(context().get(), predict, &predicted);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(predicted.predictions_size(), 2);
  absl::StatusOr<fitter::Observation> truth =
      fitter::MakeDeltaObservation("truth", "556M", 8192, 8, 1, 0);
  ASSERT_TRUE(truth.ok());
  const double true_delta = fitter::PredictDelta(fitter::Table8Params(), truth->point());
  EXPECT_NEAR(predicted.predictions(0).delta(), true_delta, 0.01);
  const double dense_at_c = 2.5 + 40 * std::pow(5e18 / 1e15, -0.12);
  EXPECT_NEAR(predicted.predictions(0).loss(), dense_at_c + predicted.predictions(0).delta(), 1e-3);
  EXPECT_EQ(predicted.predictions(1).loss(), 0);
  predict.mutable_points(0)->set_backbone("no-such-backbone");
  status = user->Predict(context().get(), predict, &predicted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("points[0]"));

  // Recommend over the default grid, then under a parameter cap.
  xmod::v1::RecommendRequest recommend;
  recommend.set_sweep_id(sweep);
  recommend.set_flops(5e18);
  recommend.set_seq_len(32768);
  recommend.set_backbone("556M");
  xmod::v1::RecommendResponse best;
  status = user->Recommend(context().get(), recommend, &best);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_GT(best.candidates_size(), 10);
  EXPECT_EQ(best.k(), best.candidates(0).point().k());
  EXPECT_EQ(best.delta(), best.candidates(0).delta());
  for (const xmod::v1::Prediction& p : best.candidates()) EXPECT_GE(p.delta(), best.delta());
  EXPECT_GT(best.k(), 1);  // at 32k a sparse model beats the dense one (paper §4)
  const double cap = best.total_params() * 0.6;
  recommend.set_max_total_params(cap);
  xmod::v1::RecommendResponse capped;
  status = user->Recommend(context().get(), recommend, &capped);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_LE(capped.total_params(), cap);
  for (const xmod::v1::Prediction& p : capped.candidates()) EXPECT_GE(p.delta(), capped.delta());
  recommend.add_ks(0);
  EXPECT_EQ(user->Recommend(context().get(), recommend, &capped).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // The dashboard's JSON: the fit and a recommendation; and the Prometheus counter.
  httplib::Client http("127.0.0.1", coordinator.ports().http);
  auto fit_json = http.Get(absl::StrCat("/api/sweeps/", sweep, "/fit"));
  ASSERT_TRUE(fit_json);
  EXPECT_EQ(fit_json->status, 200);
  EXPECT_THAT(fit_json->body, HasSubstr("\"r2\""));
  EXPECT_THAT(fit_json->body, HasSubstr("\"cv\""));
  auto rec_json = http.Get(
      absl::StrCat("/api/sweeps/", sweep, "/recommend?flops=5e18&seq_len=32768&backbone=556M"));
  ASSERT_TRUE(rec_json);
  EXPECT_EQ(rec_json->status, 200);
  EXPECT_THAT(rec_json->body, HasSubstr(absl::StrCat("\"k\":", best.k())));
  EXPECT_THAT(rec_json->body, HasSubstr("\"candidates\""));
  auto bad_json = http.Get(absl::StrCat("/api/sweeps/", sweep, "/recommend?flops=x"));
  ASSERT_TRUE(bad_json);
  EXPECT_EQ(bad_json->status, 400);
  httplib::Client prom("127.0.0.1", coordinator.ports().metrics);
  auto scraped = prom.Get("/metrics");
  ASSERT_TRUE(scraped);
  EXPECT_THAT(scraped->body, HasSubstr("xmod_fits_total{result=\"ok\"} 1"));
  EXPECT_THAT(scraped->body, HasSubstr("xmod_fit_seconds_count 1"));
  coordinator.Shutdown();
}

}  // namespace
}  // namespace xmod
