// The golden test of the fitter: data drawn from the paper's Table 8 parameters on the
// Appendix B.4 design, with Gaussian noise σ = 0.003, is fitted back (two-stage fit,
// grouped validation, bootstrap, recommendations), deterministically under the seed;
// and bad input is refused with the stage or group named.
#include "fitter/two_stage.h"

#include <cmath>
#include <map>
#include <set>

#include "fitter/law_backbones.h"
#include "fitter/recommend.h"
#include "fitter/sweep_fit.h"
#include "fitter/synthetic.h"
#include "fitter/validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod::fitter {
namespace {

using ::testing::HasSubstr;

constexpr double kSigma = 0.003;

const std::vector<Observation>& PaperData() {
  static const auto* data = new std::vector<Observation>([] {
    SyntheticOptions opt;
    opt.sigma = kSigma;
    opt.seed = 7;
    opt.out_of_range = true;
    return *PaperSweepObservations(opt);
  }());
  return *data;
}

const FitReport& PaperReport() {
  static const auto* report = new FitReport([] {
    SweepFitOptions opt;
    opt.fit.search.seed = 11;
    opt.bootstrap_samples = 24;
    absl::StatusOr<FitReport> r = FitObservations(PaperData(), opt);
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }());
  return *report;
}

TEST(SyntheticTest, PaperDesignHas109InRangeObservations) {
  int in_range = 0, a_sweep = 0;
  for (const Observation& o : PaperData()) {
    in_range += !o.held_out;
    a_sweep += !o.held_out && o.a != 1.0;
  }
  EXPECT_EQ(in_range, 109);
  EXPECT_EQ(a_sweep, 20);
}

TEST(TwoStageTest, FitsTable8DataBack) {
  const FitReport& r = PaperReport();
  EXPECT_EQ(r.fit.n_obs, 109);
  EXPECT_EQ(r.fit.n_stage1, 89);
  EXPECT_EQ(r.fit.n_stage2, 20);
  EXPECT_TRUE(r.fit.stage2_fitted);
  EXPECT_GE(r.fit.r2, 0.98);
  // In-sample RMSE cannot beat the noise by much, nor should it miss it by much.
  EXPECT_LT(r.fit.rmse, 1.2 * kSigma);
  EXPECT_GT(r.fit.rmse, 0.6 * kSigma);
  // The fitted law reproduces the true Δ surface, not only the noisy points.
  double worst = 0;
  for (const Observation& o : PaperData()) {
    worst = std::max(worst, std::fabs(PredictDelta(r.fit.params, o.point()) -
                                      PredictDelta(Table8Params(), o.point())));
  }
  EXPECT_LT(worst, 4 * kSigma);
  // Exponents land near Table 8 where the design identifies them well.
  EXPECT_NEAR(r.fit.params.rho_l, Table8Params().rho_l, 0.15);
  EXPECT_NEAR(r.fit.params.rho_n, Table8Params().rho_n, 0.4);
  EXPECT_GE(r.fit.params.u, 0);
  EXPECT_GE(r.fit.params.w, 0);
  EXPECT_GE(r.fit.params.z, 0);
  // Out-of-range extensions (L = 64k, N_act = 1.65B) are predicted, not fitted.
  EXPECT_EQ(r.out_of_range.n, 9);
  EXPECT_LT(r.out_of_range.rmse, 4 * kSigma);
}

TEST(TwoStageTest, HeldOutGroupsArePredictedNearTheNoiseLevel) {
  const FitReport& r = PaperReport();
  std::set<std::string> groups;
  double pooled_sse = 0;
  int pooled_n = 0;
  for (const GroupError& g : r.cv) {
    groups.insert(g.group);
    ASSERT_TRUE(g.error.empty()) << g.group << ": " << g.error;
    EXPECT_GT(g.n, 0) << g.group;
    pooled_sse += g.rmse * g.rmse * g.n;
    pooled_n += g.n;
    // Context and scale groups interpolate or mildly extrapolate: near the noise. An anchor
    // group has 4 runs and may extrapolate ω(A) (A = 0.5 is the only A < 1): looser.
    EXPECT_LT(g.rmse, (g.group[0] == 'A' ? 8 : 3) * kSigma) << g.group;
  }
  EXPECT_LT(std::sqrt(pooled_sse / pooled_n), 2 * kSigma);
  for (const char* g : {"L=2048", "L=32768", "N_act=165M", "N_act=936M", "A=0.5", "A=5"}) {
    EXPECT_TRUE(groups.count(g)) << g;
  }
  EXPECT_EQ(groups.count("A=1"), 0u);  // A = 1 is the baseline, never held out (B.5)
  EXPECT_EQ(r.cv.size(), 5u + 4u + 5u);
}

TEST(TwoStageTest, BootstrapIntervalsCoverTheFit) {
  const FitReport& r = PaperReport();
  ASSERT_TRUE(r.bootstrap.has_value());
  EXPECT_EQ(r.bootstrap->samples + r.bootstrap->failures, 24);
  EXPECT_GE(r.bootstrap->samples, 20);
  for (int i = 0; i < static_cast<int>(kLawParamNames.size()); ++i) {
    EXPECT_LE(ParamAt(r.bootstrap->low, i), ParamAt(r.bootstrap->high, i)) << kLawParamNames[i];
  }
  EXPECT_LE(r.bootstrap->low.rho_l, r.fit.params.rho_l);
  EXPECT_GE(r.bootstrap->high.rho_l, r.fit.params.rho_l);
  // The 1.65B out-of-range point's Δ interval is a real interval around the estimate.
  absl::StatusOr<Prediction> p =
      Predict(r.fit.params, 1e20, 32768, "1.65B", 16, 1, nullptr, &*r.bootstrap);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_LT(p->delta_low, p->delta_high);
  EXPECT_LE(p->delta_low, p->delta + 1e-9);
  EXPECT_GE(p->delta_high, p->delta - 1e-9);
}

// §3 / Fig. 2: at A = 1, N_act = 556M the recommended K is ≈ 3 at 2k and far larger at 32k.
TEST(RecommendTest, OptimalKMovesWithContextLength) {
  const FitReport& r = PaperReport();
  RecommendQuery q;
  q.flops = 1e20;
  q.backbone = "556M";
  q.as = {1};
  q.seq_len = 2048;
  absl::StatusOr<Recommendation> short_ctx = Recommend(r.fit.params, q);
  ASSERT_TRUE(short_ctx.ok()) << short_ctx.status();
  EXPECT_GE(short_ctx->best.k, 2);
  EXPECT_LE(short_ctx->best.k, 4);
  q.seq_len = 32768;
  absl::StatusOr<Recommendation> long_ctx = Recommend(r.fit.params, q);
  ASSERT_TRUE(long_ctx.ok());
  EXPECT_GE(long_ctx->best.k, 14);
  EXPECT_GE(long_ctx->best.k, 4 * short_ctx->best.k);
  // Candidates come best first, K = 1 (dense) among them with Δ = 0.
  for (size_t i = 1; i < long_ctx->candidates.size(); ++i) {
    EXPECT_LE(long_ctx->candidates[i - 1].delta, long_ctx->candidates[i].delta);
  }
}

TEST(RecommendTest, TotalParameterCapLimitsTheChoice) {
  const FitReport& r = PaperReport();
  RecommendQuery q;
  q.flops = 3e19;
  q.seq_len = 32768;
  q.backbone = "165M";
  q.ks = {4, 8, 12, 16};
  q.as = {0.5, 1, 2, 3, 4, 5};
  absl::StatusOr<Recommendation> free = Recommend(r.fit.params, q);
  ASSERT_TRUE(free.ok()) << free.status();
  q.max_total_params = free->best.total_params * 0.6;
  absl::StatusOr<Recommendation> capped = Recommend(r.fit.params, q);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_LE(capped->best.total_params, q.max_total_params);
  EXPECT_GE(capped->best.delta, free->best.delta);
  for (const Prediction& c : capped->candidates) EXPECT_LE(c.total_params, q.max_total_params);
  q.max_total_params = 1;  // nothing fits
  EXPECT_FALSE(Recommend(r.fit.params, q).ok());
}

TEST(TwoStageTest, FlagsExponentsThatEndOnABound) {
  EXPECT_TRUE(PaperReport().fit.at_bound.empty());
  FitOptions opt;
  opt.bounds.rho_hi = 0.3;  // below Table 8's ρ_L = 0.485 and ρ_N = 1.195
  absl::StatusOr<FitResult> r = FitTwoStage(PaperData(), opt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->at_bound, ::testing::Contains("rho_l"));
  EXPECT_LE(r->params.rho_l, 0.3);
}

TEST(TwoStageTest, DeterministicUnderSeed) {
  FitOptions opt;
  opt.search.seed = 5;
  absl::StatusOr<FitResult> a = FitTwoStage(PaperData(), opt);
  absl::StatusOr<FitResult> b = FitTwoStage(PaperData(), opt);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < static_cast<int>(kLawParamNames.size()); ++i) {
    EXPECT_EQ(ParamAt(a->params, i), ParamAt(b->params, i)) << kLawParamNames[i];
  }
  EXPECT_EQ(a->evaluations, b->evaluations);
}

TEST(TwoStageTest, BootstrapDoesNotDependOnThreadCount) {
  FitOptions opt;
  opt.search.seed = 3;
  opt.search.generations = 60;
  absl::StatusOr<BootstrapResult> one = Bootstrap(PaperData(), 4, 1, opt);
  absl::StatusOr<BootstrapResult> two = Bootstrap(PaperData(), 4, 2, opt);
  ASSERT_TRUE(one.ok() && two.ok());
  ASSERT_EQ(one->draws.size(), two->draws.size());
  for (size_t d = 0; d < one->draws.size(); ++d) {
    EXPECT_EQ(one->draws[d].rho_l, two->draws[d].rho_l);
    EXPECT_EQ(one->draws[d].e, two->draws[d].e);
  }
}

std::vector<Observation> Stage1Only() {
  std::vector<Observation> out;
  for (const Observation& o : PaperData()) {
    if (!o.held_out && o.a == 1.0) out.push_back(o);
  }
  return out;
}

TEST(TwoStageTest, WithoutAnchorSweepStageTwoIsSkipped) {
  absl::StatusOr<FitResult> r = FitTwoStage(Stage1Only(), FitOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->stage2_fitted);
  EXPECT_EQ(r->params.z, 0.0);
  EXPECT_GE(r->r2, 0.98);
}

TEST(TwoStageBadInputTest, TooFewObservationsForStageOne) {
  std::vector<Observation> few(PaperData().begin(), PaperData().begin() + 5);
  absl::StatusOr<FitResult> r = FitTwoStage(few, FitOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("stage 1 (A = 1 runs)"));
  EXPECT_THAT(r.status().message(), HasSubstr("at least 8"));
}

TEST(TwoStageBadInputTest, TooFewObservationsForStageTwo) {
  std::vector<Observation> obs = Stage1Only();
  int added = 0;
  for (const Observation& o : PaperData()) {
    if (o.a == 2.0 && added < 3) {
      obs.push_back(o);
      ++added;
    }
  }
  absl::StatusOr<FitResult> r = FitTwoStage(obs, FitOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("stage 2 (anchor-stride sweep, A != 1 runs)"));
}

TEST(TwoStageBadInputTest, SingleKValue) {
  std::vector<Observation> obs;
  for (const Observation& o : PaperData()) {
    if (o.a == 1.0 && o.k == 8) obs.push_back(o);
  }
  absl::StatusOr<FitResult> r = FitTwoStage(obs, FitOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("stage 1 (A = 1 runs)"));
  EXPECT_THAT(r.status().message(), HasSubstr("single K value"));
}

TEST(TwoStageBadInputTest, NonFiniteDeltaNamesTheObservation) {
  std::vector<Observation> obs = PaperData();
  obs[12].delta = std::nan("");
  absl::StatusOr<FitResult> r = FitTwoStage(obs, FitOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(obs[12].Describe()));
}

// B.5 by sweep: the A x K sweep (its A = 1 runs included) sits 0.04 nats above the law
// that the K x L and N_act sweeps follow (a baseline shift of that sweep). Its own stage-2
// offset absorbs the shift, and z, ρ_K, ρ_A come back; fitted by A without the offset,
// the shift leaks into the interaction.
constexpr double kAxkShift = 0.04;

std::vector<Observation> ShiftedSweeps(double sigma) {
  SyntheticOptions opt;
  opt.sigma = sigma;
  opt.seed = 21;
  opt.sweep_roles = true;
  opt.axk_shift = kAxkShift;
  opt.out_of_range = true;
  return *PaperSweepObservations(opt);
}

// max |z·R_{A,K}| error of `p` against Table 8 over the A x K design.
double InteractionError(const LawParams& p) {
  const LawParams t = Table8Params();
  double worst = 0;
  for (double a : {0.5, 1.0, 2.0, 3.0, 4.0, 5.0}) {
    for (int k : {4, 8, 12, 16}) {
      auto r = [&](const LawParams& q) {
        return q.z * (std::pow(k, q.rho_k) - 1) * (std::pow(AnchorShare(a), q.rho_a) - 1);
      };
      worst = std::max(worst, std::fabs(r(p) - r(t)));
    }
  }
  return worst;
}

TEST(BySweepTest, StageTwoOffsetAbsorbsABaselineShift) {
  const std::vector<Observation> data = ShiftedSweeps(/*sigma=*/0.0005);
  FitOptions opt;
  opt.search.seed = 13;
  absl::StatusOr<FitResult> r = FitTwoStage(data, opt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->by_sweep);
  EXPECT_TRUE(r->stage2_fitted);
  EXPECT_EQ(r->n_obs, 113);
  EXPECT_EQ(r->n_stage1, 89);  // A = 1 rows of kxl and nact (556M, 32k counted once)
  EXPECT_EQ(r->n_stage2, 24);  // every axk row, A = 1 included
  const LawParams t = Table8Params();
  EXPECT_NEAR(r->e_stage2 - r->params.e, kAxkShift, 0.005);
  EXPECT_NEAR(r->params.z, t.z, 0.3 * t.z);
  EXPECT_NEAR(r->params.rho_k, t.rho_k, 0.1);
  EXPECT_NEAR(r->params.rho_a, t.rho_a, 0.1);
  EXPECT_LT(InteractionError(r->params), 0.003);
  EXPECT_GE(r->r2, 0.99);
  // The law predicts without e_stage2: the in-range kxl/nact rows and the out-of-range ones.
  for (const Observation& o : data) {
    if (o.InSweep(SweepRole::kAxk)) continue;
    EXPECT_EQ(FittedDelta(*r, o), PredictDelta(r->params, o.point()));
  }

  // The same data fitted by A (sweeps forgotten): no offset of stage 2's own.
  std::vector<Observation> by_a = data;
  for (Observation& o : by_a) o.sweeps.clear();
  absl::StatusOr<FitResult> old = FitTwoStage(by_a, opt);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_FALSE(old->by_sweep);
  EXPECT_GT(InteractionError(old->params), 3 * InteractionError(r->params));
}

TEST(BySweepTest, GroupedFoldsFollowB5) {
  const std::vector<Observation> data = ShiftedSweeps(kSigma);
  const std::vector<CvFold> folds = MakeCvFolds(data);
  std::map<std::string, const CvFold*> by_name;
  for (const CvFold& f : folds) by_name[f.group] = &f;
  EXPECT_EQ(folds.size(), 5u + 4u + 5u);
  ASSERT_TRUE(by_name.count("L=32768"));
  EXPECT_FALSE(by_name["L=32768"]->stage2_only);
  EXPECT_EQ(by_name["L=32768"]->indices.size(), 11u);  // kxl rows at 32k (shared with nact)
  ASSERT_TRUE(by_name.count("N_act=165M"));
  EXPECT_EQ(by_name["N_act=165M"]->indices.size(), 11u);  // nact rows only, not axk's A = 1
  ASSERT_TRUE(by_name.count("N_act=556M"));
  for (const char* a : {"A=0.5", "A=2", "A=5"}) {
    ASSERT_TRUE(by_name.count(a)) << a;
    EXPECT_TRUE(by_name[a]->stage2_only) << a;
    EXPECT_EQ(by_name[a]->indices.size(), 4u) << a;
  }
  EXPECT_EQ(by_name.count("A=1"), 0u);  // the zero-interaction baseline is never held out

  SweepFitOptions opt;
  opt.fit.search.seed = 11;
  absl::StatusOr<FitReport> report = FitObservations(data, opt);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->cv.size(), folds.size());
  for (const GroupError& g : report->cv) {
    ASSERT_TRUE(g.error.empty()) << g.group << ": " << g.error;
    // A held-out anchor group is predicted with the axk sweep's offset: near the noise.
    EXPECT_LT(g.rmse, (g.group[0] == 'A' ? 8 : 3) * kSigma) << g.group;
  }
  EXPECT_EQ(report->out_of_range.n, 9);
  EXPECT_LT(report->out_of_range.rmse, 4 * kSigma);
}

TEST(BySweepTest, LeaveOneAnchorOutKeepsStageOne) {
  const std::vector<Observation> data = ShiftedSweeps(kSigma);
  FitOptions opt;
  absl::StatusOr<FitResult> full = FitTwoStage(data, opt);
  ASSERT_TRUE(full.ok()) << full.status();
  std::vector<CvFold> folds;
  for (const CvFold& f : MakeCvFolds(data)) {
    if (f.group == "A=3") folds.push_back(f);
  }
  ASSERT_EQ(folds.size(), 1u);
  // With stage 1 fixed, the refit's stage 1 is the full fit's, bit for bit; the search
  // costs only stage 2's evaluations.
  std::vector<Observation> train = data;
  for (int i : folds[0].indices) train[i].held_out = true;
  FitOptions fixed = opt;
  fixed.fixed_stage1 = &full->params;
  absl::StatusOr<FitResult> refit = FitTwoStage(train, fixed);
  ASSERT_TRUE(refit.ok()) << refit.status();
  EXPECT_EQ(refit->params.e, full->params.e);
  EXPECT_EQ(refit->params.rho_l, full->params.rho_l);
  EXPECT_EQ(refit->n_stage2, 20);
  EXPECT_LT(refit->evaluations, full->evaluations);
  absl::StatusOr<std::vector<GroupError>> cv = CrossValidate(data, folds, opt, &*full);
  ASSERT_TRUE(cv.ok()) << cv.status();
  std::vector<Observation> test;
  for (int i : folds[0].indices) test.push_back(data[i]);
  EXPECT_DOUBLE_EQ((*cv)[0].rmse, EvaluateFit(*refit, test).rmse);
}

TEST(BySweepBadInputTest, RowsWithoutSweepOrOffDesign) {
  std::vector<Observation> data = ShiftedSweeps(kSigma);
  std::vector<Observation> missing = data;
  missing[3].sweeps.clear();
  absl::StatusOr<FitResult> r = FitTwoStage(missing, FitOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(missing[3].Describe()));
  EXPECT_THAT(r.status().message(), HasSubstr("names no sweep"));

  std::vector<Observation> off = data;
  off[0].a = 2;  // a kxl row
  r = FitTwoStage(off, FitOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("kxl and nact sweeps are at A = 1"));

  std::vector<Observation> baseline_only;
  for (const Observation& o : data) {
    if (!o.InSweep(SweepRole::kAxk) || o.a == 1.0) baseline_only.push_back(o);
  }
  r = FitTwoStage(baseline_only, FitOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("stage 2 (rows of the axk sweep)"));
  EXPECT_THAT(r.status().message(), HasSubstr("every row has A = 1"));

  std::vector<Observation> axk_only;
  for (const Observation& o : data) {
    if (o.InSweep(SweepRole::kAxk)) axk_only.push_back(o);
  }
  r = FitTwoStage(axk_only, FitOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("stage 1 (A = 1 rows of the kxl and nact sweeps)"));
}

TEST(SweepFitTest, FromRunCurvesEndToEnd) {
  SyntheticOptions so;
  so.sigma = kSigma;
  so.seed = 2;
  std::vector<RunCurve> runs = RunCurvesFor(*PaperSweepObservations(so));
  SweepFitOptions opt;
  opt.cross_validate = false;
  absl::StatusOr<FitReport> r = FitSweep(runs, opt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->fit.n_obs, 109);
  EXPECT_GE(r->fit.r2, 0.98);
  EXPECT_EQ(r->dense_curves.count("L=2048 backbone=556M"), 1u);
  const xmod::v1::Fit proto = ToFitProto(*r);
  EXPECT_EQ(proto.n_obs(), 109);
  EXPECT_DOUBLE_EQ(proto.params().rho_l(), r->fit.params.rho_l);
  EXPECT_DOUBLE_EQ(proto.r2(), r->fit.r2);
  // Loss predictions use the dense curve of the same L and backbone.
  absl::StatusOr<Prediction> p =
      Predict(r->fit.params, 5e18, 2048, "556M", 3, 1, &r->dense_curves.at("L=2048 backbone=556M"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->loss, *r->dense_curves.at("L=2048 backbone=556M").LossAt(5e18) + p->delta, 1e-12);
}

}  // namespace
}  // namespace xmod::fitter
