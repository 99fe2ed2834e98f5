// Partial runs as evidence for an adaptive design (docs/adaptive-design.md, "Partial runs"):
// from the stored live matched-FLOP Δ of a sweep's runs, the partial-curve model fitted on its
// succeeded sparse runs' curves (fitter/partial_curve.h), and the forecast of the final Δ of
// every sparse run still running or stopped early (censored) that has a mark. Pure.
#ifndef XMOD_COORDINATOR_ADAPTIVE_PARTIAL_RUNS_H_
#define XMOD_COORDINATOR_ADAPTIVE_PARTIAL_RUNS_H_

#include <cstdint>
#include <map>
#include <vector>

#include "fitter/adaptive_design.h"
#include "fitter/live_delta.h"
#include "xmod/v1/types.pb.h"

namespace xmod {

// The forecasts (fitter::DesignState::partial) of `runs`' partial sparse runs; none while the
// sweep has fewer than fitter::kMinCurves succeeded curves of 3 or more marks. A mark's
// fraction is its FLOPs over the run's budget; a succeeded run's last mark within 2% of the
// budget is its end (f = 1).
std::vector<fitter::PartialRun> PartialRunsOf(
    const std::vector<xmod::v1::Run>& runs,
    const std::map<int64_t, std::vector<fitter::LiveDeltaPoint>>& live);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_ADAPTIVE_PARTIAL_RUNS_H_
