// See live_delta.h.
#include "fitter/live_delta.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
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

using DenseByGroup = std::map<std::pair<int, std::string>, std::vector<DenseRef>>;

DenseByGroup DenseReferences(const std::vector<RunCurve>& runs) {
  DenseByGroup dense;  // by (L, backbone)
  for (const RunCurve& run : runs) {
    if (!IsDenseReference(run)) continue;
    absl::StatusOr<LossCurve> curve = CurveOf(run);
    if (curve.ok()) dense[{run.seq_len, run.backbone}].push_back({run.flop_budget, *curve});
  }
  return dense;
}

// References of the run's own budget; all of the group when none was trained to it.
std::vector<const LossCurve*> ReferencesFor(const RunCurve& run,
                                            const std::vector<DenseRef>& group) {
  std::vector<const LossCurve*> refs;
  for (const DenseRef& d : group) {
    if (SameBudget(d.flop_budget, run.flop_budget)) refs.push_back(&d.curve);
  }
  if (refs.empty()) {
    for (const DenseRef& d : group) refs.push_back(&d.curve);
  }
  return refs;
}

// The mean of the references' losses at `flops`; nullopt when it is outside all of them.
std::optional<double> MeanDenseLoss(const std::vector<const LossCurve*>& refs, double flops) {
  double sum = 0;
  int n = 0;
  for (const LossCurve* ref : refs) {
    absl::StatusOr<double> loss = ref->LossAt(flops);
    if (!loss.ok()) continue;  // outside this reference's range: not extrapolated
    sum += *loss;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

RunLiveDelta LiveDeltaOf(const RunCurve& run, const std::vector<const LossCurve*>& refs) {
  RunLiveDelta live{run.run_id, {}};
  for (const CurvePoint& p : run.points) {
    if (!Usable(p)) continue;
    const std::optional<double> dense_loss = MeanDenseLoss(refs, p.flops);
    if (!dense_loss.has_value()) continue;
    live.points.push_back({p.flops, p.loss - *dense_loss, p.loss, *dense_loss});
  }
  std::sort(live.points.begin(), live.points.end(),
            [](const LiveDeltaPoint& a, const LiveDeltaPoint& b) { return a.flops < b.flops; });
  return live;
}

}  // namespace

bool SameBudget(double a, double b) {
  return a > 0 && b > 0 && std::abs(a - b) <= 0.02 * std::max(a, b);
}

std::vector<RunLiveDelta> LiveDeltas(const std::vector<RunCurve>& runs) {
  const DenseByGroup dense = DenseReferences(runs);
  std::vector<RunLiveDelta> out;
  for (const RunCurve& run : runs) {
    if (!IsObservation(run)) continue;
    auto group = dense.find({run.seq_len, run.backbone});
    if (group == dense.end()) continue;
    RunLiveDelta live = LiveDeltaOf(run, ReferencesFor(run, group->second));
    if (!live.points.empty()) out.push_back(std::move(live));
  }
  return out;
}

}  // namespace xmod::fitter
