// Exact bounded least squares by active-set enumeration on the QR-reduced problem.
// See bounded_lsq.h.
#include "fitter/bounded_lsq.h"

#include <glog/logging.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

namespace xmod::fitter {

namespace {

// Column scaling: features of the law differ by orders of magnitude.
Eigen::VectorXd ColumnScale(const Eigen::MatrixXd& x) {
  const int p = static_cast<int>(x.cols());
  Eigen::VectorXd scale(p);
  for (int j = 0; j < p; ++j) {
    const double norm = x.col(j).norm();
    scale(j) = norm > 0 ? 1.0 / norm : 1.0;
  }
  return scale;
}

// X_s = Q [R; 0]: ||X_s b − y||² = ||R b − c||² + rest, c = (Qᵀy)_{1..p}.
struct ReducedProblem {
  int m = 0;
  Eigen::MatrixXd r;  // (m, p)
  Eigen::VectorXd c;
};

ReducedProblem ReduceByQr(const Eigen::MatrixXd& xs, const Eigen::VectorXd& y) {
  const int p = static_cast<int>(xs.cols());
  ReducedProblem reduced;
  reduced.m = std::min<int>(p, static_cast<int>(xs.rows()));
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(xs);
  const Eigen::VectorXd qty = qr.householderQ().transpose() * y;
  reduced.r = qr.matrixQR().topRows(reduced.m).triangularView<Eigen::Upper>();  // (m, p)
  reduced.c = qty.head(reduced.m);
  return reduced;
}

std::vector<int> BoundedColumns(const std::vector<double>& lower) {
  std::vector<int> bounded;
  for (int j = 0; j < static_cast<int>(lower.size()); ++j) {
    if (std::isfinite(lower[j])) bounded.push_back(j);
  }
  return bounded;
}

// Scaled coefficients with the `fixed` ones held at their bounds and the others solved
// for; nullopt when a free coefficient falls below its bound.
std::optional<Eigen::VectorXd> SolveActiveSet(const ReducedProblem& reduced,
                                              const std::vector<double>& lower,
                                              const Eigen::VectorXd& scale,
                                              const std::vector<bool>& fixed) {
  const int p = static_cast<int>(scale.size());
  const Eigen::MatrixXd& r = reduced.r;
  Eigen::VectorXd b = Eigen::VectorXd::Zero(p);  // scaled coefficients
  Eigen::VectorXd target = reduced.c;
  std::vector<int> free_cols;
  for (int j = 0; j < p; ++j) {
    if (fixed[j]) {
      b(j) = lower[j] / scale(j);
      target -= r.col(j) * b(j);
    } else {
      free_cols.push_back(j);
    }
  }
  if (free_cols.empty()) return b;
  Eigen::MatrixXd rf(reduced.m, free_cols.size());
  for (size_t i = 0; i < free_cols.size(); ++i) rf.col(i) = r.col(free_cols[i]);
  const Eigen::VectorXd bf = rf.colPivHouseholderQr().solve(target);
  bool feasible = true;
  for (size_t i = 0; i < free_cols.size(); ++i) {
    const int j = free_cols[i];
    b(j) = bf(i);
    if (std::isfinite(lower[j]) && b(j) * scale(j) < lower[j]) feasible = false;
  }
  if (!feasible) return std::nullopt;
  return b;
}

}  // namespace

BoundedLsqResult SolveBoundedLsq(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                 const std::vector<double>& lower) {
  const int p = static_cast<int>(x.cols());
  CHECK_EQ(static_cast<int>(lower.size()), p);
  CHECK_LE(p, 20);
  CHECK_GT(x.rows(), 0);

  const Eigen::VectorXd scale = ColumnScale(x);
  const Eigen::MatrixXd xs = x * scale.asDiagonal();
  const ReducedProblem reduced = ReduceByQr(xs, y);
  const std::vector<int> bounded = BoundedColumns(lower);
  const int nb = static_cast<int>(bounded.size());

  BoundedLsqResult best;
  best.sse = std::numeric_limits<double>::infinity();
  // Bit i of `mask` set: bounded coefficient bounded[i] is held at its bound. The empty
  // mask is the unconstrained solution: when it is feasible it is the optimum, and the
  // other active sets need not be tried.
  for (unsigned mask = 0; mask < (1u << nb); ++mask) {
    if (mask == 1u && best.sse < std::numeric_limits<double>::infinity()) break;
    std::vector<bool> fixed(p, false);
    for (int i = 0; i < nb; ++i) fixed[bounded[i]] = (mask >> i) & 1u;
    const std::optional<Eigen::VectorXd> b = SolveActiveSet(reduced, lower, scale, fixed);
    if (!b.has_value()) continue;
    // The residual in the original space, not ||R b − c||² + rest: when the features are
    // nearly collinear (an exponent near 0 with a huge coefficient), the reduced form can
    // report a tiny SSE for a solution whose real predictions are far off, and the
    // exponent search would then chase that artefact.
    const double sse = (xs * *b - y).squaredNorm();
    if (sse < best.sse) {
      best.sse = sse;
      best.coef = *b;
      best.at_bound = fixed;
    }
  }
  best.coef = best.coef.cwiseProduct(scale);
  return best;
}

}  // namespace xmod::fitter
