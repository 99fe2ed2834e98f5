// The rows of a cluster shared by a lab (schema version 8; docs/operations.md, "Sharing a
// cluster"; sweeps.submitter and runs.preemptible are written with their rows by
// store_writes.h): who submitted a sweep, runs that must not be preempted, the PREEMPT order an
// open attempt is under, the slot kind and cores of each attempt member, and the usage
// accounting of `xmodctl usage` read back from them. Run inside Store::Read / Store::Write;
// errors are INTERNAL (sqlite).
#ifndef XMOD_COORDINATOR_STORE_SHARING_ROWS_H_
#define XMOD_COORDINATOR_STORE_SHARING_ROWS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

// attempts.preempt_reason of open attempt (`run_id`, `attempt`): the coordinator ordered it
// preempted for `reason`.
absl::Status SetPreemptReason(Db& db, int64_t run_id, int attempt, const std::string& reason);
// attempt_members.slot_kind ("cpu" or "cuda") and cores (CPU threads of its slots; 0 for
// CUDA) of one member.
absl::Status SetMemberSlotKind(Db& db, int64_t run_id, int attempt, int member,
                               const std::string& slot_kind, int cores);
// attempt_members.peak_gpu_memory_bytes of one member (schema version 10): the most device
// memory it held on one GPU, as its worker measured it.
absl::Status SetMemberGpuPeak(Db& db, int64_t run_id, int attempt, int member, int64_t bytes);

// sweeps.submitter of `sweep_id` (NOT_FOUND when there is no such sweep).
absl::StatusOr<std::string> LoadSweepSubmitter(Db& db, int64_t sweep_id);
// The sweep of `run_id` and its submitter (NOT_FOUND when there is no such run).
struct RunOwnerRow {
  int64_t sweep_id = 0;
  std::string submitter;
};
absl::StatusOr<RunOwnerRow> LoadRunOwner(Db& db, int64_t run_id);

// A run's sharing facts, and the PREEMPT orders its attempts were given (events
// EVENT_RUN_PREEMPT_ORDERED, oldest first).
struct PreemptionRow {
  int64_t time_ms = 0;
  int attempt = 0;
  std::string reason;
};
struct RunSharingRow {
  std::string submitter;
  bool preemptible = true;
  std::vector<PreemptionRow> preemptions;
};
// NOT_FOUND when there is no such run.
absl::StatusOr<RunSharingRow> LoadRunSharing(Db& db, int64_t run_id);

// What a restarted scheduler needs beyond scheduler_rows.h's snapshot, for the runs queued,
// running or with an open attempt.
struct SharingSnapshot {
  std::map<int64_t, std::string> submitter;                       // by run id
  std::map<int64_t, bool> preemptible;                            // by run id
  std::map<std::pair<int64_t, int>, std::string> preempt_reason;  // open attempts ordered so
  // Slot-milliseconds of attempts ended within the 24 h before `now_ms`, by submitter.
  std::map<std::string, double> used_slot_ms;
};
absl::StatusOr<SharingSnapshot> LoadSharingSnapshot(Db& db, int64_t now_ms);

// One user's figures from the database.
struct UsageRow {
  int gpu_slots_in_use = 0;  // slots of open attempts
  int cpu_slots_in_use = 0;
  int queued_runs = 0;
  int running_runs = 0;
  double gpu_hours = 0;   // GPU-slot hours of attempts within [from_ms, now_ms]
  double core_hours = 0;  // CPU core hours of attempts within [from_ms, now_ms]
};
// By submitter, every user with live runs or attempts within the window. An open attempt
// counts up to `now_ms`; attempts stored before version 8 have no slot kind and count
// neither.
absl::StatusOr<std::map<std::string, UsageRow>> LoadUsage(Db& db, int64_t from_ms, int64_t now_ms);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_SHARING_ROWS_H_
