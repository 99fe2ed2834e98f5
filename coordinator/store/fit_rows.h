// What the fit trigger (coordinator/fitting/fit_trigger.h) polls for: per sweep, and per study
// over its member sweeps, how many runs succeeded, when the last of them finished and when
// the newest stored fit attempt was made. Each function runs inside a Store::Read closure.
#ifndef XMOD_COORDINATOR_STORE_FIT_ROWS_H_
#define XMOD_COORDINATOR_STORE_FIT_ROWS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

struct SucceededRuns {
  int64_t id = 0;  // the sweep's or the study's
  int64_t succeeded = 0;
  int64_t last_finished_ms = 0;
  int64_t last_fit_ms = -1;  // -1 = no fits row
};

// One entry per sweep with a succeeded run.
absl::StatusOr<std::vector<SucceededRuns>> SucceededRunsBySweep(Db& db);
// One entry per study with a succeeded run in a member sweep.
absl::StatusOr<std::vector<SucceededRuns>> SucceededRunsByStudy(Db& db);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_FIT_ROWS_H_
