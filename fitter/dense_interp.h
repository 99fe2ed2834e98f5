// A validation-loss curve against training FLOPs, and interpolation on it: linear in
// log FLOPs and log loss between the two bracketing evaluations, never extrapolated
// (paper B.5: the dense loss at the sparse run's logged FLOPs, same L and backbone).
// Immutable after Create; thread-safe.
#ifndef XMOD_FITTER_DENSE_INTERP_H_
#define XMOD_FITTER_DENSE_INTERP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xmod::fitter {

struct CurvePoint {
  double flops = 0;  // cumulative training FLOPs at the evaluation
  double loss = 0;   // validation loss (nats)
};

class LossCurve {
 public:
  // Sorts the points by FLOPs. INVALID_ARGUMENT, with `name` (the group, e.g.
  // "dense L=2048 backbone=556M") in the message, when a point has non-finite or
  // non-positive FLOPs or loss, when two points share a FLOP value with different losses,
  // or when there are no points.
  static absl::StatusOr<LossCurve> Create(std::vector<CurvePoint> points, std::string name);

  // The loss at `flops`, interpolated in log-log space. OUT_OF_RANGE naming the curve
  // and its FLOP range when `flops` lies outside [min_flops(), max_flops()].
  absl::StatusOr<double> LossAt(double flops) const;

  double min_flops() const { return points_.front().flops; }
  double max_flops() const { return points_.back().flops; }
  const std::vector<CurvePoint>& points() const { return points_; }
  const std::string& name() const { return name_; }

 private:
  LossCurve(std::vector<CurvePoint> points, std::string name)
      : points_(std::move(points)), name_(std::move(name)) {}

  std::vector<CurvePoint> points_;  // ascending FLOPs, distinct
  std::string name_;
};

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_DENSE_INTERP_H_
