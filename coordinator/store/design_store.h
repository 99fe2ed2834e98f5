// The stored decisions of law-guided designs (docs/adaptive-design.md): one
// design_decisions row per decision, with the whole xmod.v1.DesignDecision, and one
// design_proposals row per proposal so that users can query them with SQL. Used by the
// adaptive controller (the decisions it makes) and ProposeRuns (decisions submitted).
// Functions run inside the caller's transaction; thread-compatible.
#ifndef XMOD_COORDINATOR_STORE_DESIGN_STORE_H_
#define XMOD_COORDINATOR_STORE_DESIGN_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {

// Stores `decision` (its id is ignored) and returns the new id, which it also sets.
absl::StatusOr<int64_t> InsertDecision(Db& db, xmod::v1::DesignDecision* decision);

// The sweep's decisions, newest first, at most `limit`.
absl::StatusOr<std::vector<xmod::v1::DesignDecision>> LoadDecisions(Db& db, int64_t sweep_id,
                                                                    int limit);

// The sweep's latest decision of `source` ("adaptive", "propose"; "" = any), if any.
absl::StatusOr<std::optional<xmod::v1::DesignDecision>> LoadLatestDecision(
    Db& db, int64_t sweep_id, const std::string& source);

// The censored (stopped early) run's record, written when the scheduler stops it.
absl::Status InsertCensoredRun(Db& db, int64_t run_id, double flops, double live_delta,
                               const std::string& reason, int64_t now_ms);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_DESIGN_STORE_H_
