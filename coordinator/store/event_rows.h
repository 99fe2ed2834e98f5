// The `events` table: the coordinator's log of what happened to sweeps and runs, each change
// with the credential that made it (`actor`, schema version 9; NULL when the coordinator acted
// on its own). Written inside the transaction of the change it records, so the log holds a
// change exactly when the change is stored; read by `xmodctl run show`, `sweep show`, `usage`
// and the dashboard through ListEvents and GetUsage. Run inside Store::Read / Store::Write;
// errors are INTERNAL (sqlite) unless stated.
#ifndef XMOD_COORDINATOR_STORE_EVENT_ROWS_H_
#define XMOD_COORDINATOR_STORE_EVENT_ROWS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"
#include "xmod/v1/event_kind.pb.h"
#include "xmod/v1/types.pb.h"

namespace xmod {

// sweep_id or run_id 0: the event concerns none (stored NULL). `actor`: the credential that
// made the change ("" = the anonymous caller); nullopt when the coordinator acted on its own.
absl::Status InsertEvent(Db& db, int64_t now_ms, xmod::v1::EventKind kind, int64_t sweep_id,
                         int64_t run_id, const std::string& text,
                         const std::optional<std::string>& actor = std::nullopt);

// Which events LoadEvents reads: each set field narrows the answer.
struct EventQuery {
  int64_t sweep_id = 0;              // the sweep's events and its runs'
  int64_t run_id = 0;                // that run's events
  std::optional<std::string> actor;  // changes made by this credential
  int64_t before_id = 0;             // ids below this one (0: from the newest)
  int64_t since_ms = 0;              // at or after this time (0: from the first)
  bool changes_only = false;         // only events with an actor
  int limit = 100;                   // at most this many
};
// Newest first.
absl::StatusOr<std::vector<xmod::v1::Event>> LoadEvents(Db& db, const EventQuery& query);

// What one credential changed within a window.
struct ActorChanges {
  int changes = 0;
  // Changes to work whose owner is another credential (PREEMPT orders are the scheduler's
  // doing under the sharing policy and count only in `changes`).
  int to_others_work = 0;
};
// By actor, the changes made at or after `since_ms`.
absl::StatusOr<std::map<std::string, ActorChanges>> CountChangesByActor(Db& db, int64_t since_ms);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_EVENT_ROWS_H_
