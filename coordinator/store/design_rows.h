// Design rows: the queries of the design layer (coordinator/adaptive/) that are not stored
// decisions (design_store.h) — the per-sweep run counts the adaptive controller polls and the
// val/loss point counts the sweep monitor polls (its live_delta rows: live_delta_rows.h).
// Functions run inside the caller's transaction; thread-compatible.
#ifndef XMOD_COORDINATOR_STORE_DESIGN_ROWS_H_
#define XMOD_COORDINATOR_STORE_DESIGN_ROWS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

// A sweep not cancelled, as the adaptive controller polls it.
struct SweepRunCounts {
  int64_t sweep_id = 0;
  std::string spec;  // the serialized xmod.v1.SweepSpec
  // Counts that make a decision due: succeeded, failed, cancelled and all runs.
  std::vector<int64_t> signature;
};

// Every sweep not cancelled with its run counts, in one grouped query.
absl::StatusOr<std::vector<SweepRunCounts>> LoadSweepRunCounts(Db& db);

// A sweep's val/loss points, as the sweep monitor polls them.
struct ValLossCounts {
  int64_t points = 0;
  double flops = 0;     // the sum of the points' FLOPs
  bool active = false;  // a run of the sweep is queued or running
};

// Per sweep with a queued or running run, or listed in `also`: its val/loss point counts.
// Polled twice a second (the sweep monitor): it reads each run's val/loss rows through
// metrics_by_name, never its other points.
absl::StatusOr<std::map<int64_t, ValLossCounts>> LoadValLossCounts(
    Db& db, const std::vector<int64_t>& also);
// The statement LoadValLossCounts runs (tests check its plan).
std::string ValLossCountsSql(const std::vector<int64_t>& also);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_DESIGN_ROWS_H_
