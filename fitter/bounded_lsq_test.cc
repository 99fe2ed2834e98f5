// Exact bounded least squares against a slow, obviously-correct reference: projected
// coordinate descent run to convergence on random problems, plus the KKT conditions.
#include "fitter/bounded_lsq.h"

#include <cmath>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace xmod::fitter {
namespace {

constexpr double kFree = -std::numeric_limits<double>::infinity();

// Cyclic coordinate descent with projection onto the bounds: converges to the optimum of
// this convex problem; many sweeps make it exact enough for a reference.
Eigen::VectorXd CoordinateDescent(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                  const std::vector<double>& lower) {
  const Eigen::MatrixXd g = x.transpose() * x;
  const Eigen::VectorXd h = x.transpose() * y;
  Eigen::VectorXd b = Eigen::VectorXd::Zero(x.cols());
  for (int j = 0; j < b.size(); ++j) b(j) = std::isfinite(lower[j]) ? lower[j] : 0.0;
  for (int sweep = 0; sweep < 200000; ++sweep) {
    for (int j = 0; j < b.size(); ++j) {
      const double rest = h(j) - g.row(j).dot(b) + g(j, j) * b(j);
      b(j) = std::max(rest / g(j, j), lower[j]);
    }
  }
  return b;
}

TEST(BoundedLsqTest, MatchesCoordinateDescentOnRandomProblems) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 6 + trial % 20;
    const int p = 1 + trial % 4;
    Eigen::MatrixXd x(n, p);
    Eigen::VectorXd y(n);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < p; ++j) x(i, j) = normal(rng);
      y(i) = normal(rng);
    }
    x.col(0).setOnes();  // an offset, like e
    std::vector<double> lower(p, 0.0);
    lower[0] = kFree;
    if (p > 2) lower[2] = -0.3;  // a non-zero bound too
    const BoundedLsqResult got = SolveBoundedLsq(x, y, lower);
    const Eigen::VectorXd want = CoordinateDescent(x, y, lower);
    const double want_sse = (x * want - y).squaredNorm();
    EXPECT_NEAR(got.sse, want_sse, 1e-8 * (1 + want_sse)) << "trial " << trial;
    EXPECT_NEAR(got.sse, (x * got.coef - y).squaredNorm(), 1e-9 * (1 + want_sse));
    for (int j = 0; j < p; ++j) {
      EXPECT_NEAR(got.coef(j), want(j), 1e-5) << "trial " << trial << " coef " << j;
      if (std::isfinite(lower[j])) EXPECT_GE(got.coef(j), lower[j] - 1e-12);
    }
    // KKT: zero gradient on free coordinates, non-negative gradient on active bounds.
    const Eigen::VectorXd grad = x.transpose() * (x * got.coef - y);
    for (int j = 0; j < p; ++j) {
      if (got.at_bound[j]) {
        EXPECT_GE(grad(j), -1e-8) << "trial " << trial;
      } else {
        EXPECT_NEAR(grad(j), 0.0, 1e-8) << "trial " << trial;
      }
    }
  }
}

TEST(BoundedLsqTest, ActiveBoundWhenUnconstrainedSolutionIsNegative) {
  Eigen::MatrixXd x(4, 2);
  x << 1, 1, 1, 2, 1, 3, 1, 4;
  Eigen::VectorXd y(4);
  y << 4, 3, 2, 1;  // slope -1 unconstrained
  const BoundedLsqResult r = SolveBoundedLsq(x, y, {kFree, 0.0});
  EXPECT_DOUBLE_EQ(r.coef(1), 0.0);
  EXPECT_NEAR(r.coef(0), 2.5, 1e-12);
  EXPECT_TRUE(r.at_bound[1]);
  EXPECT_FALSE(r.at_bound[0]);
}

TEST(BoundedLsqTest, ZeroColumnIsHandled) {
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(5, 2);
  x.col(0).setOnes();
  Eigen::VectorXd y = Eigen::VectorXd::Constant(5, 0.7);
  const BoundedLsqResult r = SolveBoundedLsq(x, y, {kFree, 0.0});
  EXPECT_NEAR(r.coef(0), 0.7, 1e-12);
  EXPECT_NEAR(r.sse, 0.0, 1e-20);
}

}  // namespace
}  // namespace xmod::fitter
