// Reads a sweep's run curves from the coordinator's SQLite database, read-only, for
// xmod-fit --db: the `flop_aligned_loss` view (val/loss against training FLOPs of the
// canonical metric rows) joined with `runs` for state, the layer plan's N0 and the grid
// label (which names the run's B.4 sweep, fitter/observations.h).
// Only SUCCEEDED runs are read: a run still training has no final loss yet.
// Thread-compatible; opens its own connection per call.
#ifndef XMOD_FITTER_DB_SOURCE_H_
#define XMOD_FITTER_DB_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/observations.h"

namespace xmod::fitter {

// NOT_FOUND when the file or the sweep does not exist; FAILED_PRECONDITION when the
// database lacks the views (an older schema); INTERNAL with sqlite's message otherwise.
absl::StatusOr<std::vector<RunCurve>> LoadSweepRuns(const std::string& db_path, int64_t sweep_id);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_DB_SOURCE_H_
