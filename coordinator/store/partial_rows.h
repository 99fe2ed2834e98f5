// The stored live matched-FLOP Δ of a sweep's runs (the live_delta rows the sweep monitor
// writes, docs/adaptive-design.md "Live matched-FLOP Δ"), read back for an adaptive design's
// partial-curve model (fitter/partial_curve.h): every run's points, ascending FLOPs.
#ifndef XMOD_COORDINATOR_STORE_PARTIAL_ROWS_H_
#define XMOD_COORDINATOR_STORE_PARTIAL_ROWS_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/live_delta.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

// run id -> its live Δ points (flops, delta; the losses left 0), for every run of the sweep.
absl::StatusOr<std::map<int64_t, std::vector<fitter::LiveDeltaPoint>>> LoadSweepLiveDeltas(
    Db& db, int64_t sweep_id);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_PARTIAL_ROWS_H_
