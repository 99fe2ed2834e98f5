// How many runs are in each state, for the coordinator's xmod_runs gauges
// (coordinator/metrics/coordinator_metrics.h, SetRunCounts). Runs inside a Store::Read
// closure.
#ifndef XMOD_COORDINATOR_STORE_RUN_COUNTS_H_
#define XMOD_COORDINATOR_STORE_RUN_COUNTS_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

// State name ("QUEUED", "RUNNING", ...) -> runs in it; states without runs are absent.
absl::StatusOr<std::map<std::string, int>> CountRunsByState(Db& db);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_RUN_COUNTS_H_
