// Log-log interpolation on a loss curve without extrapolation. See dense_interp.h.
#include "fitter/dense_interp.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace xmod::fitter {

absl::StatusOr<LossCurve> LossCurve::Create(std::vector<CurvePoint> points, std::string name) {
  if (points.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": the curve has no evaluations"));
  }
  for (const CurvePoint& p : points) {
    if (!std::isfinite(p.flops) || !(p.flops > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": FLOPs must be finite and positive, got ", p.flops));
    }
    if (!std::isfinite(p.loss) || !(p.loss > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": loss must be finite and positive, got ", p.loss, " at flops ", p.flops));
    }
  }
  std::sort(points.begin(), points.end(),
            [](const CurvePoint& a, const CurvePoint& b) { return a.flops < b.flops; });
  std::vector<CurvePoint> unique;
  for (const CurvePoint& p : points) {
    if (!unique.empty() && unique.back().flops == p.flops) {
      if (unique.back().loss != p.loss) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": two evaluations at flops ", p.flops,
                                                       " disagree (", unique.back().loss, " vs ",
                                                       p.loss, ")"));
      }
      continue;
    }
    unique.push_back(p);
  }
  return LossCurve(std::move(unique), std::move(name));
}

absl::StatusOr<double> LossCurve::LossAt(double flops) const {
  if (!(flops >= min_flops() && flops <= max_flops())) {
    return absl::OutOfRangeError(absl::StrCat(name_, ": flops ", flops,
                                              " lie outside the curve's range [", min_flops(), ", ",
                                              max_flops(), "]; not extrapolating"));
  }
  auto upper = std::lower_bound(points_.begin(), points_.end(), flops,
                                [](const CurvePoint& p, double f) { return p.flops < f; });
  if (upper->flops == flops) return upper->loss;
  const CurvePoint& hi = *upper;
  const CurvePoint& lo = *(upper - 1);
  const double t = std::log(flops / lo.flops) / std::log(hi.flops / lo.flops);
  return std::exp(std::log(lo.loss) + t * std::log(hi.loss / lo.loss));
}

}  // namespace xmod::fitter
