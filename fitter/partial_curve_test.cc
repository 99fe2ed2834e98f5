// The partial-curve model (partial_curve.h): fitted from completed curves it recovers the
// approach exponent and the spread of slopes; its forecast of a partial curve's end is as
// uncertain as that spread makes it, so a curve that crosses late is not stopped early with
// confidence the sweep's curves do not give, while a clearly worse run is.
#include "fitter/partial_curve.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace xmod::fitter {
namespace {

constexpr double kAlpha = 0.5;
const std::vector<double> kFractions = {0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0};

// A curve ending at `final` approaching it with slope `b`, noise sd `noise` at every mark.
std::vector<DeltaMark> Curve(double final, double b, double noise, std::mt19937_64* rng,
                             double up_to = 1.0) {
  std::normal_distribution<double> eps(0, noise);
  std::vector<DeltaMark> out;
  for (double f : kFractions) {
    if (f > up_to + 1e-9) break;
    out.push_back({f, final + b * (std::pow(f, -kAlpha) - 1) + (noise > 0 ? eps(*rng) : 0)});
  }
  return out;
}

TEST(PartialCurveTest, FitRecoversTheApproachAndTheSpreadOfSlopes) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> slope(0.02, 0.005);
  std::vector<std::vector<DeltaMark>> completed;
  for (int i = 0; i < 40; ++i) completed.push_back(Curve(0.01 * (i % 5), slope(rng), 5e-4, &rng));
  absl::StatusOr<PartialCurveModel> model = FitPartialCurveModel(completed);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->curves, 40);
  EXPECT_NEAR(model->alpha, kAlpha, 0.11);
  EXPECT_NEAR(model->slope_mean, 0.02, 0.003);
  EXPECT_NEAR(model->slope_sd, 0.005, 0.002);
  EXPECT_NEAR(model->mark_sd, 5e-4, 2.5e-4);
}

TEST(PartialCurveTest, TooFewCompletedCurvesGiveNoModel) {
  std::mt19937_64 rng(1);
  std::vector<std::vector<DeltaMark>> completed = {Curve(0, 0.02, 0, &rng),
                                                   Curve(0, 0.02, 0, &rng, 0.5),  // partial
                                                   {{1.0, 0.0}}};                 // one mark
  EXPECT_EQ(FitPartialCurveModel(completed).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FitPartialCurveModel({{{1.5, 0.0}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The sweep's completed curves approach their end at rates spread over [0.01, 0.06].
PartialCurveModel SpreadModel() {
  std::mt19937_64 rng(3);
  std::vector<std::vector<DeltaMark>> completed;
  for (double b : {0.01, 0.02, 0.03, 0.04, 0.05, 0.06}) {
    completed.push_back(Curve(0.0, b, 5e-4, &rng));
    completed.push_back(Curve(0.02, b, 5e-4, &rng));
  }
  absl::StatusOr<PartialCurveModel> model = FitPartialCurveModel(completed);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.value_or(PartialCurveModel());
}

TEST(PartialCurveTest, ACurveThatCrossesLateIsNotStoppedEarly) {
  const PartialCurveModel model = SpreadModel();
  std::mt19937_64 rng(11);
  // The group's best final Δ is 0; this run ends better (−0.01) but approaches steeply, so a
  // quarter of the way it reads +0.05, worse than the best by far more than the margin.
  const double best_final = 0.0, margin = 0.01, z = 2;
  const std::vector<DeltaMark> early = Curve(-0.01, 0.06, 5e-4, &rng, 0.25);
  ASSERT_GT(early.back().delta, best_final + margin + 0.02);  // its live Δ says "worse"
  absl::StatusOr<Forecast> forecast = ForecastFinal(model, early);
  ASSERT_TRUE(forecast.ok()) << forecast.status();
  // The forecast knows it cannot know: the truth lies within its interval ...
  EXPECT_LE(std::abs(forecast->mean - (-0.01)), z * forecast->sd) << forecast->mean;
  // ... and the run is not stopped.
  EXPECT_FALSE(ConfidentlyWorse(*forecast, best_final, margin, z))
      << "mean " << forecast->mean << " sd " << forecast->sd;
  // Later marks reveal its own slope: the forecast tightens around the truth.
  absl::StatusOr<Forecast> later = ForecastFinal(model, Curve(-0.01, 0.06, 5e-4, &rng, 0.75));
  ASSERT_TRUE(later.ok());
  EXPECT_LT(later->sd, forecast->sd / 2);
  EXPECT_NEAR(later->mean, -0.01, 3 * later->sd + 1e-3);
  EXPECT_FALSE(ConfidentlyWorse(*later, best_final, margin, z));
}

TEST(PartialCurveTest, AClearlyWorseRunIsStoppedAndACompletedOneIsFinal) {
  const PartialCurveModel model = SpreadModel();
  std::mt19937_64 rng(5);
  absl::StatusOr<Forecast> bad = ForecastFinal(model, Curve(0.12, 0.035, 5e-4, &rng, 0.25));
  ASSERT_TRUE(bad.ok());
  EXPECT_TRUE(ConfidentlyWorse(*bad, 0.0, 0.01, 2)) << bad->mean << " " << bad->sd;
  // A complete curve's forecast is its end, as certain as a mark.
  absl::StatusOr<Forecast> done = ForecastFinal(model, Curve(0.03, 0.05, 0, &rng));
  ASSERT_TRUE(done.ok());
  EXPECT_NEAR(done->mean, 0.03, 1e-3);
  EXPECT_LT(done->sd, 2 * model.mark_sd);
  EXPECT_EQ(done->last_fraction, 1.0);
}

}  // namespace
}  // namespace xmod::fitter
