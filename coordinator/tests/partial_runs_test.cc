// Partial runs as a design's evidence (coordinator/adaptive/partial_runs.h): forecasts come from
// the sweep's own succeeded curves, for sparse runs running or stopped early, never for dense
// runs, finished runs or runs without a mark; none until enough curves succeeded.
#include "coordinator/adaptive/partial_runs.h"

#include <cmath>
#include <map>
#include <vector>

#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/tests/test_util.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

// Marks at a quarter, half, three quarters and the end of `budget` on Δ(f) = end + b(f^-½ − 1).
std::vector<fitter::LiveDeltaPoint> Marks(double budget, double end, double b, int count = 4) {
  std::vector<fitter::LiveDeltaPoint> out;
  for (int i = 1; i <= count; ++i) {
    const double f = i / 4.0;
    fitter::LiveDeltaPoint p;
    p.flops = f * budget;
    p.delta = end + b * (1 / std::sqrt(f) - 1);
    out.push_back(p);
  }
  return out;
}

TEST(PartialRunsTest, RunningAndStoppedSparseRunsAreForecastFromTheSweepsCurves) {
  const std::string dir = NewTestDir("partial_runs");
  absl::StatusOr<std::vector<xmod::v1::Run>> expanded = ExpandSweep(AdaptiveTinySweep(dir));
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  std::vector<xmod::v1::Run> runs;
  for (const xmod::v1::Run& r : *expanded) {
    if (r.spec().model().k() >= 2) runs.push_back(r);
    if (runs.size() == 6) break;
  }
  ASSERT_EQ(runs.size(), 6u);
  std::map<int64_t, std::vector<fitter::LiveDeltaPoint>> live;
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].set_id(static_cast<int64_t>(i) + 1);
    runs[i].set_state(xmod::v1::SUCCEEDED);
  }
  const double budget = runs[0].spec().training().flop_budget();
  for (int i = 0; i < 2; ++i) live[i + 1] = Marks(budget, 0.01 * i, 0.02 + 0.01 * i);
  runs[3].set_state(xmod::v1::RUNNING);  // half way
  live[4] = Marks(budget, 0.0, 0.03, 2);
  runs[4].set_state(xmod::v1::CANCELLED);  // stopped early at a quarter
  runs[4].set_censored(true);
  live[5] = Marks(budget, 0.05, 0.03, 1);
  runs[5].set_state(xmod::v1::RUNNING);  // no mark yet
  // Two succeeded curves: no model yet, no forecast.
  EXPECT_TRUE(PartialRunsOf(runs, live).empty());

  live[3] = Marks(budget, -0.01, 0.04);
  const std::vector<fitter::PartialRun> partial = PartialRunsOf(runs, live);
  ASSERT_EQ(partial.size(), 2u);
  EXPECT_EQ(partial[0].forecast.run_id, 4);
  EXPECT_FALSE(partial[0].stopped);
  EXPECT_DOUBLE_EQ(partial[0].last_fraction, 0.5);
  EXPECT_NEAR(partial[0].forecast.delta, 0.0, 3 * partial[0].forecast_sd + 1e-3);
  EXPECT_EQ(partial[1].forecast.run_id, 5);
  EXPECT_TRUE(partial[1].stopped);
  // A quarter of the way the forecast is less certain than half way.
  EXPECT_GT(partial[1].forecast_sd, partial[0].forecast_sd);
  EXPECT_EQ(partial[1].forecast.k, runs[4].spec().model().k());
}

}  // namespace
}  // namespace xmod
