// The rows of a pilot sweep that the B.3 pilot selection reads (fitter/pilot_selection.h):
// every run of the sweep with its configuration, state, total parameters and final
// validation loss (the run_summary view's final_val_loss). Runs inside a Store::Read closure.
#ifndef XMOD_COORDINATOR_STORE_PILOT_ROWS_H_
#define XMOD_COORDINATOR_STORE_PILOT_ROWS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/pilot_selection.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

// Every run of sweep `sweep_id`, by id. NOT_FOUND naming the sweep when it does not exist.
absl::StatusOr<std::vector<fitter::PilotRun>> ReadPilotRuns(Db& db, int64_t sweep_id);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_PILOT_ROWS_H_
