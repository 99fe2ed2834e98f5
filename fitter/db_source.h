// A sweep's run curves from the results database as the fitter's RunCurves: the typed read
// of resultsdb/run_curves.h (SUCCEEDED runs, val/loss against training FLOPs of the
// canonical metric rows, the layer plan's N0 and the grid label, which names the run's B.4
// sweep, fitter/observations.h). For xmod-fit --db (a read-only connection of its own) and
// the coordinator (its store's connections). Thread-compatible.
#ifndef XMOD_FITTER_DB_SOURCE_H_
#define XMOD_FITTER_DB_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/observations.h"
#include "resultsdb/run_curves.h"

namespace xmod::fitter {

// The fitter's view of a stored run: A = 1 where the architecture has none (A is ignored
// for DENSE), N0 = 4 where the spec names none (RunCurve's defaults).
RunCurve RunCurveFromStored(const StoredRunCurve& stored);

// The SUCCEEDED runs of the sweep in the file at `db_path`, opened read-only. Errors of
// LoadSucceededRunCurves: NOT_FOUND when the file or the sweep does not exist,
// FAILED_PRECONDITION when the file is no results database or a newer one.
absl::StatusOr<std::vector<RunCurve>> LoadSweepRuns(const std::string& db_path, int64_t sweep_id);

// The same on an open connection (e.g. inside Store::Read).
absl::StatusOr<std::vector<RunCurve>> LoadSweepRuns(Db& db, int64_t sweep_id);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_DB_SOURCE_H_
