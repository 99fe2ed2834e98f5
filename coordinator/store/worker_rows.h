// Who a worker is and which worker holds an attempt, as the worker gateway checks a
// worker credential against them (coordinator/api/worker_identity.h). Each function runs
// inside a Store::Read closure.
#ifndef XMOD_COORDINATOR_STORE_WORKER_ROWS_H_
#define XMOD_COORDINATOR_STORE_WORKER_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

// The name worker `worker_id` registered with; "" when no worker has that id.
absl::StatusOr<std::string> WorkerName(Db& db, int64_t worker_id);

// The names of the workers holding attempt `attempt` of run `run_id`, member 0 first (a
// gang's attempt is held by each of its members); empty when there is no such attempt.
absl::StatusOr<std::vector<std::string>> AttemptHolders(Db& db, int64_t run_id, int attempt);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_WORKER_ROWS_H_
