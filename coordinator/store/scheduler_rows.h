// The scheduler's rows (coordinator/scheduling/): the statements only the scheduling layer
// runs — an attempt written with its members (the attempt_members table, schema version 6),
// the check that a sweep still takes runs, and the snapshot a restarted scheduler rebuilds
// its memory from. Run inside Store::Read / Store::Write; errors are INTERNAL (sqlite) unless
// stated.
#ifndef XMOD_COORDINATOR_STORE_SCHEDULER_ROWS_H_
#define XMOD_COORDINATOR_STORE_SCHEDULER_ROWS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/store/store_writes.h"
#include "resultsdb/sqlite_db.h"
#include "xmod/v1/types.pb.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

// One worker's share of an attempt: a row of attempt_members (member 0 runs rank 0).
struct AttemptMemberRow {
  int64_t worker_id = 0;  // 0: a worker not known by that name (a migrated row)
  std::string worker;
  std::vector<int32_t> slots;
  bool operator==(const AttemptMemberRow& other) const {
    return worker_id == other.worker_id && worker == other.worker && slots == other.slots;
  }
};
// The members' names joined by ',' (attempts.worker; docs/results-database.md).
std::string JoinedMemberNames(const std::vector<AttemptMemberRow>& members);

// Inserts attempt `start` with `members` (at least one): its attempts row, whose worker_id is
// member 0's, worker the members' names joined by ',' and slots their slot lists joined by
// ';' (e.g. "0,1;0,1"), and one attempt_members row per member. start's worker_id, worker
// and slots are ignored.
absl::Status InsertAttemptWithMembers(Db& db, AttemptStart start,
                                      const std::vector<AttemptMemberRow>& members);

// OK when sweep `sweep_id` takes new runs; NOT_FOUND when it does not exist,
// FAILED_PRECONDITION when it was cancelled.
absl::Status CheckSweepOpen(Db& db, int64_t sweep_id);

// What the scheduler rebuilds from after a restart.
struct OpenAttempt {
  int64_t run_id = 0;
  int attempt = 0;
  int64_t lease_expires_ms = 0;
  int64_t max_seq = -1;                   // highest stored metric seq (-1 = none)
  std::vector<AttemptMemberRow> members;  // in member order (one unless a gang)
  std::string rendezvous;                 // a gang's TCPStore address; empty otherwise
};
struct RunQueueEntry {
  int64_t run_id = 0;
  int64_t sweep_id = 0;
  int priority = 0;
  xmod::v1::RunState state = xmod::v1::QUEUED;
  int attempts = 0;
  int failures = 0;
  int max_attempts = 0;
  int64_t not_before_ms = 0;
  std::string name;
  xmod::v1::RunSpec spec;
  int oom_failures = 0;
  std::optional<xmod::v1::Checkpoint> latest_checkpoint;
};
struct WorkerRow {
  int64_t id = 0;
  std::string name;
  std::vector<xmod::v1::Slot> slots;
  int64_t last_seen_ms = 0;
  std::string advertise_host;  // for gangs, as registered
  int32_t rendezvous_port_first = 0;
  int32_t rendezvous_port_last = 0;
};
struct SchedulerSnapshot {
  std::vector<RunQueueEntry> runs;         // runs QUEUED or RUNNING, and runs with an
                                           // open attempt in any state
  std::vector<OpenAttempt> open_attempts;  // attempts with ended_ms NULL
  std::vector<WorkerRow> workers;
  std::map<std::string, int64_t> counters;  // the counters table (AddToCounter)
};
absl::StatusOr<SchedulerSnapshot> LoadSchedulerSnapshot(Db& db);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_SCHEDULER_ROWS_H_
