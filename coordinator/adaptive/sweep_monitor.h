// SweepMonitor: live matched-FLOP Δ and early stopping (docs/adaptive-design.md).
//
// Live Δ. Poll(), called by the coordinator's ticker, finds the sweeps whose val/loss
// points changed since the last poll (a count and a FLOP sum per sweep, over sweeps with a
// queued or running run and those seen active at the previous poll) and recomputes their
// live Δ (fitter/live_delta.h: each sparse run's val/loss minus its dense reference's at the
// same training FLOPs, interpolated, never extrapolated). Every point is stored in the
// live_delta table, replacing the sweep's previous rows in one transaction; the run's
// latest point is its Progress.live_delta, its series is SERIES_LIVE_DELTA in GetMetrics, and
// running runs export xmod_run_live_delta{run}. Watchers are told through the change feed.
//
// Early stopping (EarlyStopping in the sweep spec, off by default). At the same pass, a
// RUNNING sparse run whose latest live Δ lies past after_fraction of its budget and exceeds,
// by more than the margin, the best live Δ at the same FLOPs (within 2%) of any other run of
// its (backbone, L, budget) group is stopped through `stop_early` (the scheduler ends it
// CANCELLED and records it in censored_runs).
//
// Runs on the ticker's thread; Poll() is not reentrant. Thread-compatible.
#ifndef XMOD_COORDINATOR_ADAPTIVE_SWEEP_MONITOR_H_
#define XMOD_COORDINATOR_ADAPTIVE_SWEEP_MONITOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/store/change_feed.h"
#include "coordinator/store/store.h"

namespace xmod {

class SweepMonitor {
 public:
  // Stops a run early at its live-Δ mark `flops` with Δ `live_delta` (a censored run).
  using StopEarlyFn = std::function<absl::Status(int64_t run_id, double flops, double live_delta,
                                                 const std::string& reason)>;

  // `store` and `feed` must outlive the monitor; `metrics` may be null.
  SweepMonitor(Store* store, ChangeFeed* feed, CoordinatorMetrics* metrics, StopEarlyFn stop_early);

  // One pass (see top of file). INTERNAL/UNAVAILABLE with sqlite's message when the
  // database cannot be read or written; the next poll retries.
  absl::Status Poll();

  // Recomputes one sweep's live Δ and applies its early-stopping rule now.
  absl::Status Update(int64_t sweep_id);

 private:
  Store* const store_;
  ChangeFeed* const feed_;
  CoordinatorMetrics* const metrics_;
  const StopEarlyFn stop_early_;
  // sweep -> (val/loss points, their FLOP sum) at the last update
  std::map<int64_t, std::pair<int64_t, double>> seen_;
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_ADAPTIVE_SWEEP_MONITOR_H_
