// The runs of a sweep with their validation-loss curves against training FLOPs: the input
// of a scaling-law fit, read from the results database. One typed read for everyone who fits:
// xmod-fit --db (fitter/db_source.h) and the coordinator's fit trigger and fit queries.
// A fit reads SUCCEEDED runs only (a run still training has no final loss yet); each curve
// is the run's canonical val/loss points (the flop_aligned_loss view), ordered by FLOPs.
// Stateless; the Db overloads run on the caller's connection (e.g. inside Store::Read).
#ifndef XMOD_RESULTSDB_RUN_CURVES_H_
#define XMOD_RESULTSDB_RUN_CURVES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/types.pb.h"

namespace xmod {

class Db;  // resultsdb/sqlite_db.h; declared only, so that readers need no sqlite3.h

struct StoredLossPoint {
  double flops = 0;  // cumulative training FLOPs; NaN when stored as 'NaN'
  double loss = 0;   // val/loss (nats); NaN when stored as 'NaN'
};

// One run of a sweep as the database holds it.
struct StoredRunCurve {
  int64_t run_id = 0;
  std::string name;
  std::string label;  // grid label(s), '+'-joined; "" without one
  xmod::v1::RunState state = xmod::v1::RUN_STATE_UNSPECIFIED;
  double flop_budget = 0;  // training FLOPs the run is to spend
  xmod::v1::Architecture arch = xmod::v1::ARCHITECTURE_UNSPECIFIED;
  int k = 1;
  std::optional<double> a;  // nullopt: the architecture has no anchor stride A
  int seq_len = 0;
  std::string backbone;
  bool held_out = false;
  std::optional<int> n0;  // the RunSpec's dense prefix N0, when it names one
  uint64_t seed = 0;      // the RunSpec's training seed (with the budget, the run's identity)
  std::vector<StoredLossPoint> points;
};

// The sweep's runs in `states` (empty: every state), by id. FAILED_PRECONDITION when the
// file is not a results database (schema version 0) or one written by a newer coordinator;
// NOT_FOUND when the sweep does not exist; sqlite's errors otherwise (sqlite_db.h).
absl::StatusOr<std::vector<StoredRunCurve>> LoadRunCurves(
    Db& db, int64_t sweep_id, const std::vector<xmod::v1::RunState>& states);

// LoadRunCurves of the SUCCEEDED runs: what a fit reads.
absl::StatusOr<std::vector<StoredRunCurve>> LoadSucceededRunCurves(Db& db, int64_t sweep_id);

// The same on a read-only connection of its own to the file at `db_path`; NOT_FOUND when
// the file cannot be opened.
absl::StatusOr<std::vector<StoredRunCurve>> LoadSucceededRunCurves(const std::string& db_path,
                                                                   int64_t sweep_id);

}  // namespace xmod

#endif  // XMOD_RESULTSDB_RUN_CURVES_H_
