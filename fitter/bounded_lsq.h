// Exact bound-constrained linear least squares for few coefficients:
//   minimize ||X b − y||²  subject to  b_j >= lower_j for the bounded j (others free).
// The law's linear coefficients at fixed exponents (paper B.5: offset e free; reward and
// correction coefficients u, w, z >= 0) are such a problem. Method: one Householder QR of
// the column-scaled X reduces the problem to p×p; then every active set (each bounded
// coefficient either at its bound or free: 2^m sets) is solved by a small rank-revealing
// QR, and the best feasible solution is kept. The problem is convex, so its minimum lies in
// the relative interior of some face, whose unconstrained solution is among those tried:
// the result is the exact optimum (to rounding), not an iterate. Meant for p <= ~10.
// Pure functions; thread-safe.
#ifndef XMOD_FITTER_BOUNDED_LSQ_H_
#define XMOD_FITTER_BOUNDED_LSQ_H_

#include <vector>

#include "Eigen/Dense"

namespace xmod::fitter {

struct BoundedLsqResult {
  Eigen::VectorXd coef;        // (p)
  double sse = 0;              // ||X coef − y||²
  std::vector<bool> at_bound;  // coefficient j sits on its lower bound
};

// `lower` has one entry per column of X: a finite value bounds that coefficient below,
// -infinity leaves it free. X must have at least one row; p = X.cols() <= 20.
BoundedLsqResult SolveBoundedLsq(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                 const std::vector<double>& lower);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_BOUNDED_LSQ_H_
