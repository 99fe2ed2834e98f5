// See partial_runs.h.
#include "coordinator/adaptive/partial_runs.h"

#include <algorithm>
#include <optional>

#include "coordinator/adaptive/seeding.h"
#include "fitter/observations.h"
#include "fitter/partial_curve.h"

namespace xmod {
namespace {

// The run's marks as fractions of its budget; a succeeded run's last mark is its end.
std::vector<fitter::DeltaMark> MarksOf(const xmod::v1::Run& run,
                                       const std::vector<fitter::LiveDeltaPoint>& points) {
  const double budget = run.spec().training().flop_budget();
  std::vector<fitter::DeltaMark> marks;
  if (!(budget > 0)) return marks;
  for (const fitter::LiveDeltaPoint& p : points) {
    marks.push_back({std::min(1.0, p.flops / budget), p.delta});
  }
  if (run.state() == xmod::v1::SUCCEEDED && !marks.empty() &&
      fitter::SameBudget(points.back().flops, budget)) {
    marks.back().fraction = 1.0;
  }
  return marks;
}

bool Partial(const xmod::v1::Run& run) {
  return run.state() == xmod::v1::RUNNING || (run.state() == xmod::v1::CANCELLED && run.censored());
}

}  // namespace

std::vector<fitter::PartialRun> PartialRunsOf(
    const std::vector<xmod::v1::Run>& runs,
    const std::map<int64_t, std::vector<fitter::LiveDeltaPoint>>& live) {
  std::vector<std::vector<fitter::DeltaMark>> completed;
  for (const xmod::v1::Run& run : runs) {
    auto it = live.find(run.id());
    if (run.state() != xmod::v1::SUCCEEDED || it == live.end()) continue;
    completed.push_back(MarksOf(run, it->second));
  }
  std::vector<fitter::PartialRun> out;
  absl::StatusOr<fitter::PartialCurveModel> model = fitter::FitPartialCurveModel(completed);
  if (!model.ok()) return out;
  for (const xmod::v1::Run& run : runs) {
    auto it = live.find(run.id());
    std::optional<fitter::Candidate> c = CandidateOf(run);
    if (!Partial(run) || it == live.end() || it->second.empty() || !c || c->IsDense()) continue;
    absl::StatusOr<fitter::Forecast> forecast =
        fitter::ForecastFinal(*model, MarksOf(run, it->second));
    if (!forecast.ok()) continue;
    absl::StatusOr<fitter::Observation> o = fitter::MakeDeltaObservation(
        run.name(), c->backbone, c->seq_len, c->k, c->a, forecast->mean);
    if (!o.ok()) continue;
    o->run_id = run.id();
    o->flops = c->flops;
    fitter::PartialRun p;
    p.forecast = *std::move(o);
    p.forecast_sd = forecast->sd;
    p.last_fraction = forecast->last_fraction;
    p.stopped = run.state() == xmod::v1::CANCELLED;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace xmod
