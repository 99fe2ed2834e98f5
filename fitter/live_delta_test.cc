#include "fitter/live_delta.h"

#include <cmath>

#include "gtest/gtest.h"

namespace xmod::fitter {
namespace {

RunCurve Curve(int64_t id, xmod::v1::Architecture arch, int k, double budget,
               std::vector<CurvePoint> points) {
  RunCurve run;
  run.run_id = id;
  run.name = "run" + std::to_string(id);
  run.arch = arch;
  run.backbone = "tiny";
  run.seq_len = 256;
  run.k = k;
  run.flop_budget = budget;
  run.points = std::move(points);
  return run;
}

TEST(LiveDeltaTest, InterpolatesTheDenseReferenceAndNeverExtrapolates) {
  // The dense run has reached 2e9 FLOPs; the sparse run is at 3e9.
  const std::vector<RunCurve> runs = {
      Curve(1, xmod::v1::DENSE, 1, 4e9, {{1e9, 4.0}, {2e9, 3.5}}),
      Curve(2, xmod::v1::XMOD, 4, 4e9, {{1e9, 4.2}, {1.5e9, 3.9}, {3e9, 3.4}}),
  };
  const std::vector<RunLiveDelta> live = LiveDeltas(runs);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].run_id, 2);
  ASSERT_EQ(live[0].points.size(), 2u);  // the mark at 3e9 waits for the reference
  EXPECT_NEAR(live[0].points[0].delta, 0.2, 1e-12);
  // Log-log interpolation at 1.5e9 between (1e9, 4.0) and (2e9, 3.5).
  const double t = std::log(1.5) / std::log(2.0);
  const double dense = std::exp(std::log(4.0) + t * (std::log(3.5) - std::log(4.0)));
  EXPECT_NEAR(live[0].points[1].dense_loss, dense, 1e-12);
  EXPECT_NEAR(live[0].points[1].delta, 3.9 - dense, 1e-12);
}

TEST(LiveDeltaTest, AveragesSameBudgetReplicatesAndPrefersThemToOtherBudgets) {
  const std::vector<RunCurve> runs = {
      Curve(1, xmod::v1::DENSE, 1, 4e9, {{1e9, 4.0}, {4e9, 3.0}}),
      Curve(2, xmod::v1::DENSE, 1, 4e9, {{1e9, 4.2}, {4e9, 3.2}}),
      Curve(3, xmod::v1::DENSE, 1, 8e9, {{1e9, 9.0}, {8e9, 9.0}}),  // another budget: unused
      Curve(4, xmod::v1::XMOD, 2, 4e9, {{1e9, 4.3}}),
      Curve(5, xmod::v1::MOD, 2, 4e9, {{1e9, 4.3}}),  // not an observation of the law
  };
  const std::vector<RunLiveDelta> live = LiveDeltas(runs);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].run_id, 4);
  EXPECT_NEAR(live[0].points[0].delta, 0.2, 1e-12);
}

TEST(LiveDeltaTest, ARunWithoutAReferenceInItsGroupHasNoDelta) {
  RunCurve sparse = Curve(2, xmod::v1::XMOD, 4, 4e9, {{1e9, 4.2}});
  sparse.seq_len = 512;
  const std::vector<RunCurve> runs = {Curve(1, xmod::v1::DENSE, 1, 4e9, {{1e9, 4.0}, {2e9, 3.5}}),
                                      sparse, Curve(3, xmod::v1::XMOD, 4, 4e9, {{1e9, NAN}})};
  EXPECT_TRUE(LiveDeltas(runs).empty());
}

}  // namespace
}  // namespace xmod::fitter
