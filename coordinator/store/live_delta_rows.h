// The live_delta table (docs/adaptive-design.md, "Live matched-FLOP Δ"): the sweep monitor
// replaces a sweep's rows as its runs evaluate, and an adaptive design's partial-curve model
// reads them back. Rows only: the Δ is computed above the store (fitter/live_delta.h).
// Functions run inside the caller's transaction; thread-compatible.
#ifndef XMOD_COORDINATOR_STORE_LIVE_DELTA_ROWS_H_
#define XMOD_COORDINATOR_STORE_LIVE_DELTA_ROWS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

// One row: a sparse run's Δ at one evaluation mark, in nats, with the two losses it is the
// difference of.
struct LiveDeltaRow {
  int64_t run_id = 0;
  double flops = 0;
  double delta = 0;
  double sparse_loss = 0;
  double dense_loss = 0;
};

// Replaces the sweep's live_delta rows by `rows`.
absl::Status ReplaceLiveDeltas(Db& db, int64_t sweep_id, const std::vector<LiveDeltaRow>& rows);

// Every run's rows of the sweep, by run id and then ascending FLOPs (run_id, flops and delta
// read; the losses left 0).
absl::StatusOr<std::vector<LiveDeltaRow>> LoadSweepLiveDeltas(Db& db, int64_t sweep_id);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_LIVE_DELTA_ROWS_H_
