// See live_delta.h.
#include "fitter/live_delta.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "fitter/dense_interp.h"

namespace xmod::fitter {
namespace {

bool Usable(const CurvePoint& p) {
  return std::isfinite(p.flops) && std::isfinite(p.loss) && p.flops > 0 && p.loss > 0;
}

// The run's usable points as a curve; INVALID_ARGUMENT when it has none.
absl::StatusOr<LossCurve> CurveOf(const RunCurve& run) {
  std::vector<CurvePoint> points;
  for (const CurvePoint& p : run.points) {
    if (Usable(p)) points.push_back(p);
  }
  return LossCurve::Create(std::move(points), run.name);
}

struct DenseRef {
  double flop_budget = 0;
  LossCurve curve;
};

}  // namespace

bool SameBudget(double a, double b) {
  return a > 0 && b > 0 && std::abs(a - b) <= 0.02 * std::max(a, b);
}

std::vector<RunLiveDelta> LiveDeltas(const std::vector<RunCurve>& runs) {
  std::map<std::pair<int, std::string>, std::vector<DenseRef>> dense;  // by (L, backbone)
  for (const RunCurve& run : runs) {
    if (!IsDenseReference(run)) continue;
    absl::StatusOr<LossCurve> curve = CurveOf(run);
    if (curve.ok()) dense[{run.seq_len, run.backbone}].push_back({run.flop_budget, *curve});
  }
  std::vector<RunLiveDelta> out;
  for (const RunCurve& run : runs) {
    if (!IsObservation(run)) continue;
    auto group = dense.find({run.seq_len, run.backbone});
    if (group == dense.end()) continue;
    // References of the run's own budget; all of the group when none was trained to it.
    std::vector<const LossCurve*> refs;
    for (const DenseRef& d : group->second) {
      if (SameBudget(d.flop_budget, run.flop_budget)) refs.push_back(&d.curve);
    }
    if (refs.empty()) {
      for (const DenseRef& d : group->second) refs.push_back(&d.curve);
    }
    RunLiveDelta live{run.run_id, {}};
    for (const CurvePoint& p : run.points) {
      if (!Usable(p)) continue;
      double sum = 0;
      int n = 0;
      for (const LossCurve* ref : refs) {
        absl::StatusOr<double> loss = ref->LossAt(p.flops);
        if (!loss.ok()) continue;  // outside this reference's range: not extrapolated
        sum += *loss;
        ++n;
      }
      if (n == 0) continue;
      const double dense_loss = sum / n;
      live.points.push_back({p.flops, p.loss - dense_loss, p.loss, dense_loss});
    }
    if (!live.points.empty()) {
      std::sort(live.points.begin(), live.points.end(),
                [](const LiveDeltaPoint& a, const LiveDeltaPoint& b) { return a.flops < b.flops; });
      out.push_back(std::move(live));
    }
  }
  return out;
}

}  // namespace xmod::fitter
