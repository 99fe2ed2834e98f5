// LiveState: the run queue's memory copy of the live part of the database (queued and
// running runs, open attempts; scheduler.h, "State"), as plain data that the scheduler's
// parts (placement, leases, pending changes, rebuild) read and change while the Scheduler
// holds its lock. The workers are the WorkerRegistry's (worker_registry.h).
#ifndef XMOD_COORDINATOR_SCHEDULING_LIVE_STATE_H_
#define XMOD_COORDINATOR_SCHEDULING_LIVE_STATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "xmod/v1/coordinator.pb.h"
#include "xmod/v1/types.pb.h"
#include "xmod/v1/worker.pb.h"

namespace xmod::scheduling {

// A recorded checkpoint a retry may resume from.
struct ResumeCheckpoint {
  int64_t step = 0;
  std::string path;
  std::string sha256;
  int64_t bytes = 0;
};
ResumeCheckpoint ResumeCheckpointOf(const xmod::v1::Checkpoint& stored);
xmod::v1::ResumePoint ResumePointOf(const ResumeCheckpoint& checkpoint);

struct RunEntry {
  int64_t sweep_id = 0;
  int priority = 0;
  xmod::v1::RunState state = xmod::v1::QUEUED;
  int attempts = 0;
  int failures = 0;
  int max_attempts = 0;
  int oom_failures = 0;       // out-of-memory failures since submission or the last resume
  int64_t not_before_ms = 0;  // monotonic
  int current_attempt = 0;    // open attempt, 0 = none
  std::string name;
  xmod::v1::RunSpec spec;
  std::optional<ResumeCheckpoint> latest_checkpoint;
  // The good recorded checkpoint just older than latest_checkpoint: the fallback of a
  // resume (Assignment.fallbacks) should the newest fail verification.
  std::optional<ResumeCheckpoint> previous_checkpoint;
  int lost = 0;  // lost leases since the scheduler started or the run was resumed
  // Why the queued run was last passed over, where known (PendingReason); memory only.
  std::string pending_reason;
  std::string user;         // who submitted its sweep (sweeps.submitter; "" = anonymous)
  bool preemptible = true;  // runs.preemptible
};

// One worker's share of an attempt (the only one, unless the run is a gang).
struct Member {
  int64_t worker_id = 0;
  std::string worker;
  int64_t worker_epoch = 0;      // the worker's registration count when it took its part
  int64_t lease_expires_ms = 0;  // monotonic
  std::vector<int32_t> slots;
  bool delivered = true;  // the worker has its part (gang members get it when they poll)
};

struct AttemptEntry {
  std::vector<Member> members;  // members[0] runs rank 0: metrics and checkpoints
  // A gang's parts, built at placement (members[i] gets parts[i]); empty otherwise.
  std::vector<xmod::v1::Assignment> parts;
  // A gang's TCPStore address ("tcp://host:port", stored with the attempt); empty otherwise.
  // No two open attempts hold the same one.
  std::string rendezvous;
  // Why the coordinator ordered it preempted (attempts.preempt_reason); empty: not ordered.
  // Every heartbeat of its members answers a PREEMPT order until it ends.
  std::string preempt_reason;
  int64_t started_ms = 0;        // monotonic; a restart counts from the rebuild
  int64_t checkpointed_ms = -1;  // monotonic, its newest recorded checkpoint (-1: none)
};

using QueueKey = std::tuple<int, int64_t, int64_t>;  // (-priority, sweep, run)
using AttemptKey = std::pair<int64_t, int>;          // (run, attempt)

inline QueueKey QueueKeyOf(int64_t run_id, const RunEntry& run) {
  return {-run.priority, run.sweep_id, run_id};
}

// A change to publish once its write committed.
struct Touched {
  int64_t sweep_id;
  int64_t run_id;
};

struct LiveState {
  std::map<int64_t, RunEntry> runs;  // queued, running, or stopping
  // Queued runs in policy order. A run is here exactly when it is in `runs` in state QUEUED,
  // and its key never changes.
  std::set<QueueKey> queue;
  std::map<AttemptKey, AttemptEntry> attempts;
  // Slot-milliseconds of ended attempts by user, since the scheduler started plus the 24 h
  // before it (the share order's tie-break; a heuristic: a failed commit does not undo it).
  std::map<std::string, double> used_slot_ms;
};

// The member of `attempt` on `worker_id`, or null.
Member* MemberOn(AttemptEntry& attempt, int64_t worker_id);
const Member* MemberOn(const AttemptEntry& attempt, int64_t worker_id);

// Notes checkpoint `recorded` on `run`: the newest becomes the resume point, the one just
// older than it the fallback.
void NoteCheckpoint(RunEntry& run, const ResumeCheckpoint& recorded);
// The resume point and fallback of `run` from its recorded checkpoints (ordered by step).
void ResetCheckpoints(RunEntry& run, const std::vector<xmod::v1::Checkpoint>& recorded);

}  // namespace xmod::scheduling

#endif  // XMOD_COORDINATOR_SCHEDULING_LIVE_STATE_H_
