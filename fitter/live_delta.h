// Live matched-FLOP Δ: how far a sparse run trails (or leads) its dense reference while
// both still train. At every evaluation mark C of a sparse X-MoD run,
//
//   Δ(C) = L_sparse(C) − L̂_dense(C)
//
// where L̂_dense(C) is the mean validation loss at C of the dense references of the same
// L and backbone (paper B.5) trained to the same budget (any budget when none matches),
// each interpolated in log-log space as the fit does (dense_interp.h). A mark beyond every
// reference's furthest evaluation has no Δ yet: never extrapolated. When the references
// catch up, the next call fills it in.
// Pure functions; thread-safe.
#ifndef XMOD_FITTER_LIVE_DELTA_H_
#define XMOD_FITTER_LIVE_DELTA_H_

#include <cstdint>
#include <vector>

#include "fitter/observations.h"

namespace xmod::fitter {

struct LiveDeltaPoint {
  double flops = 0;        // the sparse run's evaluation mark C (training FLOPs)
  double delta = 0;        // L_sparse(C) − L̂_dense(C), nats
  double sparse_loss = 0;  // L_sparse(C)
  double dense_loss = 0;   // L̂_dense(C)
};

struct RunLiveDelta {
  int64_t run_id = 0;
  std::vector<LiveDeltaPoint> points;  // ascending FLOPs; only marks a reference covers
};

// Two positive training-FLOP budgets within 2% of each other: the same budget (a run stops
// at the first whole step past its budget).
bool SameBudget(double a, double b);

// Δ at the marks of every sparse run in `runs` (X-MoD with K >= 2, IsObservation) that has
// at least one covered mark. `runs` may hold running runs: their curves end where they are.
// Points with non-finite or non-positive FLOPs or loss are skipped.
std::vector<RunLiveDelta> LiveDeltas(const std::vector<RunCurve>& runs);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_LIVE_DELTA_H_
