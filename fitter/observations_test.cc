// Dense interpolation and Δ observations from run curves, including the bad inputs that
// must be refused with the group named.
#include "fitter/observations.h"

#include <cmath>
#include <limits>

#include "fitter/dense_interp.h"
#include "fitter/fit_observations.h"
#include "fitter/synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod::fitter {
namespace {

using ::testing::HasSubstr;

TEST(LossCurveTest, InterpolatesLinearlyInLogLog) {
  absl::StatusOr<LossCurve> c = LossCurve::Create({{4e18, 3.0}, {1e18, 4.0}}, "dense");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(*c->LossAt(1e18), 4.0);
  EXPECT_DOUBLE_EQ(*c->LossAt(4e18), 3.0);
  // Geometric midpoint of FLOPs → geometric mean of losses.
  EXPECT_NEAR(*c->LossAt(2e18), std::sqrt(12.0), 1e-12);
}

TEST(LossCurveTest, NeverExtrapolates) {
  absl::StatusOr<LossCurve> c = LossCurve::Create({{1e18, 4.0}, {4e18, 3.0}}, "dense L=2048");
  ASSERT_TRUE(c.ok());
  absl::StatusOr<double> past = c->LossAt(5e18);
  ASSERT_FALSE(past.ok());
  EXPECT_THAT(past.status().message(), HasSubstr("dense L=2048"));
  EXPECT_THAT(past.status().message(), HasSubstr("not extrapolating"));
  EXPECT_FALSE(c->LossAt(0.5e18).ok());
}

TEST(LossCurveTest, RejectsNonFinite) {
  absl::StatusOr<LossCurve> c =
      LossCurve::Create({{1e18, std::numeric_limits<double>::quiet_NaN()}}, "dense L=4096");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("dense L=4096"));
}

std::vector<Observation> SmallTruth() {
  std::vector<Observation> obs;
  for (int k : {2, 4, 8}) {
    obs.push_back(*MakeDeltaObservation("x", "165M", 2048, k, 1, 0.0));
    obs.back().delta = PredictDelta(Table8Params(), obs.back().point());
    obs.back().name = "xmod-165M-L2048-K" + std::to_string(k);
  }
  return obs;
}

TEST(ObservationsTest, RecoversDeltaFromCurves) {
  const std::vector<Observation> truth = SmallTruth();
  const std::vector<RunCurve> runs = RunCurvesFor(truth);
  absl::StatusOr<std::vector<Observation>> got = BuildObservations(runs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), truth.size());
  for (size_t i = 0; i < truth.size(); ++i) {
    EXPECT_NEAR((*got)[i].delta, truth[i].delta, 1e-12);
    EXPECT_EQ((*got)[i].k, truth[i].k);
    EXPECT_EQ((*got)[i].run_id, runs[i + 1].run_id);  // runs[0] is the dense reference
    EXPECT_EQ((*got)[i].n0, runs[i + 1].n0);
    EXPECT_DOUBLE_EQ((*got)[i].flops, 1e19);
    EXPECT_GT((*got)[i].dense_loss, 0);
  }
}

// Seed replicates (GridSpec.seeds): two dense runs of one group shifted by ±0.02 average to
// the unshifted reference, and three sparse runs of one configuration shifted by
// +0.03, -0.01, +0.01 merge into one observation with the mean Δ.
TEST(ObservationsTest, AveragesSeedReplicates) {
  const std::vector<Observation> truth = SmallTruth();
  const std::vector<RunCurve> base = RunCurvesFor(truth);
  const auto shifted = [](RunCurve run, double shift, int64_t id) {
    for (CurvePoint& p : run.points) p.loss += shift;
    run.run_id = id;
    return run;
  };
  std::vector<RunCurve> runs = {shifted(base[0], +0.02, 100), shifted(base[0], -0.02, 101)};
  for (size_t i = 1; i < base.size(); ++i) runs.push_back(base[i]);
  runs.push_back(shifted(base[1], +0.03, 102));  // K = 2, seed 2
  runs.push_back(shifted(base[1], -0.01, 103));  // K = 2, seed 3 (with base[1]: mean +0.0067)
  absl::StatusOr<std::vector<Observation>> got = BuildObservations(runs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), truth.size());
  EXPECT_EQ((*got)[0].k, 2);
  EXPECT_EQ((*got)[0].replicates, 3);
  EXPECT_EQ((*got)[0].run_id, base[1].run_id);  // the first occurrence names the merge
  EXPECT_NEAR((*got)[0].delta, truth[0].delta + 0.02 / 3, 1e-9);
  for (size_t i = 1; i < truth.size(); ++i) {
    EXPECT_EQ((*got)[i].replicates, 1);
    EXPECT_NEAR((*got)[i].delta, truth[i].delta, 1e-9);
  }
}

TEST(ObservationsTest, ReplicatesOfDifferentSweepsStaySeparate) {
  std::vector<Observation> obs = SmallTruth();
  obs.push_back(obs[0]);
  obs[0].sweeps = {SweepRole::kNact};
  obs[3].sweeps = {SweepRole::kAxk};
  EXPECT_EQ(AverageReplicates(obs).size(), 4u);
  obs[3].sweeps = {SweepRole::kNact};
  EXPECT_EQ(AverageReplicates(obs).size(), 3u);
}

TEST(ObservationsTest, SparseRunWithoutDenseReferenceNamesItsGroup) {
  std::vector<RunCurve> runs = RunCurvesFor(SmallTruth());
  runs.erase(runs.begin());  // the dense run
  absl::StatusOr<std::vector<Observation>> got = BuildObservations(runs);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("L=2048 backbone=165M"));
  EXPECT_THAT(got.status().message(), HasSubstr("no dense reference"));
}

TEST(ObservationsTest, NanLossNamesTheRun) {
  std::vector<RunCurve> runs = RunCurvesFor(SmallTruth());
  runs[2].points[3].loss = std::numeric_limits<double>::infinity();
  absl::StatusOr<std::vector<Observation>> got = BuildObservations(runs);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr(runs[2].name));
  EXPECT_THAT(got.status().message(), HasSubstr("L=2048 backbone=165M"));
}

TEST(ObservationsTest, SparseRunPastTheDenseCurveIsNotExtrapolated) {
  std::vector<RunCurve> runs = RunCurvesFor(SmallTruth());
  // 1% past the dense end: matched at the dense end; 10% past: refused.
  runs[1].points.push_back({1.01e19, runs[1].points.back().loss});
  absl::StatusOr<std::vector<Observation>> ok = BuildObservations(runs);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_DOUBLE_EQ((*ok)[0].flops, 1e19);
  runs[1].points.push_back({1.1e19, runs[1].points.back().loss});
  absl::StatusOr<std::vector<Observation>> bad = BuildObservations(runs);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("not extrapolating"));
}

TEST(ObservationsTest, OtherArchitecturesAreSkipped) {
  std::vector<RunCurve> runs = RunCurvesFor(SmallTruth());
  RunCurve moe = runs[1];
  moe.arch = xmod::v1::MOE;
  moe.name = "moe";
  runs.push_back(moe);
  absl::StatusOr<std::vector<Observation>> got = BuildObservations(runs);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 3u);
}

TEST(ObservationsTest, DeltaObservationValidation) {
  EXPECT_THAT(MakeDeltaObservation("row 3", "556M", 2048, 1, 1, 0.1).status().message(),
              HasSubstr("K must be >= 2"));
  EXPECT_THAT(MakeDeltaObservation("row 4", "556M", 2048, 4, 1, std::nan("")).status().message(),
              HasSubstr("L=2048 backbone=556M K=4"));
  EXPECT_FALSE(MakeDeltaObservation("row 5", "556M", 2048, 3, 0.5, 0.1).ok());  // A·K = 1.5
}

TEST(ObservationsTest, GridLabelsNameSweepRoles) {
  EXPECT_EQ(SweepRoleOfLabel("kxl"), SweepRole::kKxl);
  EXPECT_EQ(SweepRoleOfLabel("kxl-64k"), SweepRole::kKxl);
  EXPECT_EQ(SweepRoleOfLabel("nact-1.65B"), SweepRole::kNact);
  EXPECT_EQ(SweepRoleOfLabel("axk"), SweepRole::kAxk);
  EXPECT_EQ(SweepRoleOfLabel("axkx"), std::nullopt);
  EXPECT_EQ(SweepRoleOfLabel("pilot"), std::nullopt);
  EXPECT_EQ(SweepRoleOfLabel(""), std::nullopt);
  EXPECT_EQ(SweepRolesOfLabels("nact+axk"),
            (std::vector<SweepRole>{SweepRole::kNact, SweepRole::kAxk}));
  EXPECT_EQ(SweepRolesOfLabels("pilot+kxl-64k+kxl"), std::vector<SweepRole>{SweepRole::kKxl});
  EXPECT_TRUE(SweepRolesOfLabels("pilot").empty());

  std::vector<RunCurve> runs;
  RunCurve dense;
  dense.name = "dense";
  dense.arch = xmod::v1::DENSE;
  dense.backbone = "165M";
  dense.seq_len = 32768;
  dense.points = {{1e18, 3.0}, {2e18, 2.9}};
  runs.push_back(dense);
  RunCurve sparse = dense;
  sparse.name = "sparse";
  sparse.arch = xmod::v1::XMOD;
  sparse.k = 4;
  sparse.a = 2;
  sparse.label = "axk";
  runs.push_back(sparse);
  sparse.label = "other";
  runs.push_back(sparse);
  absl::StatusOr<std::vector<Observation>> obs = BuildObservations(runs);
  ASSERT_TRUE(obs.ok()) << obs.status();
  ASSERT_EQ(obs->size(), 2u);
  EXPECT_TRUE((*obs)[0].InSweep(SweepRole::kAxk));
  EXPECT_TRUE((*obs)[1].sweeps.empty());
}

}  // namespace
}  // namespace xmod::fitter
