// The `shared_runs` table (schema version 7): a member sweep's run that a study does not train
// because an earlier member sweep trains the same configuration (coordinator/fitting/
// study_sharing.h decides which; docs/paper-fidelity.md, "B.4 as a study"). Each function
// runs inside a Store::Read or Store::Write closure.
#ifndef XMOD_COORDINATOR_STORE_SHARED_RUN_ROWS_H_
#define XMOD_COORDINATOR_STORE_SHARED_RUN_ROWS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

struct SharedRunRow {
  int64_t run_id = 0;            // the run not trained
  int64_t sweep_id = 0;          // its sweep
  int64_t trained_run_id = 0;    // the run trained in its place (another sweep's)
  int64_t study_id = 0;          // the study that linked them
  int64_t trained_sweep_id = 0;  // the trained run's sweep (read back; not stored)
};

// Records that `row.run_id` is not trained, `row.trained_run_id` is in its place (sweep_id
// is read from the run). ALREADY_EXISTS when the run is linked already.
absl::Status InsertSharedRun(Db& db, const SharedRunRow& row, int64_t now_ms);

// The links whose untrained run belongs to one of `sweep_ids`, by run id.
absl::StatusOr<std::vector<SharedRunRow>> LoadSharedRuns(Db& db,
                                                         const std::vector<int64_t>& sweep_ids);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_SHARED_RUN_ROWS_H_
