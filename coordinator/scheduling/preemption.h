// Preemption, pure (docs/operations.md, "How preemption chooses its victims"): which running
// attempts to send PREEMPT so that queued runs that cannot be placed can start.
//
// The queue is scanned in ShareOrder's order (share_order.h). A run that fits the slots free
// now (counting slots of attempts already ordered to stop, and less the slots of runs
// ahead of it that fit or got victims) claims them. A run that does not fit, and is not
// borrowing, may displace attempts that are not already ordered and at least
// SharingPolicy::min_run_ms old (hysteresis: a run just started or just resumed is left
// alone), and are
//   - of another user holding slots of that kind beyond its quota, up to those borrowed
//     slots, whatever their priority and whatever their `preemptible` says ("quota": a run
//     beyond its user's quota only borrows, so borrowing can never keep slots from a user
//     within quota), or
//   - preemptible (the run's `preemptible` is not false) and of lower priority ("priority").
// Equal priorities never preempt each other except to take back borrowed slots. Victims are
// ordered borrowed first (preemptible ones before the others), then lowest priority, then
// most recently checkpointed (or started: the least work lost), then newest attempt; on each
// worker with enough slots the fewest victims from the front of that order that free the
// slots are taken, and the worker (for a gang, the `members` workers) needing the fewest
// victims wins. A gang victim is stopped as
// a whole and frees its slots on every member's worker.
#ifndef XMOD_COORDINATOR_SCHEDULING_PREEMPTION_H_
#define XMOD_COORDINATOR_SCHEDULING_PREEMPTION_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/scheduling/live_state.h"
#include "coordinator/scheduling/placement.h"
#include "coordinator/scheduling/share_order.h"
#include "coordinator/scheduling/sharing_config.h"
#include "xmod/v1/worker.pb.h"

namespace xmod::scheduling {

// An open attempt as preemption sees it.
struct RunningAttempt {
  AttemptKey key;
  std::string user;
  int priority = 0;
  bool preemptible = true;
  bool ordered = false;          // already under a PREEMPT order
  int64_t started_ms = 0;        // monotonic
  int64_t checkpointed_ms = -1;  // monotonic, its newest checkpoint (-1: none yet)
  xmod::v1::SlotKind kind = xmod::v1::CPU;
  std::vector<std::pair<int64_t, int>> members;  // (worker id, slots held there)
};

// A live worker's capacity.
struct WorkerRoom {
  int slots = 0;
  int free = 0;  // not held by any open attempt
  xmod::v1::SlotKind kind = xmod::v1::CPU;
};

struct PreemptOrder {
  AttemptKey key;
  std::string cause;          // "priority" or "quota"
  std::string reason;         // for the event and `xmodctl run show`
  std::string claimant_user;  // the user of the run it makes room for: the event's actor
  bool operator==(const PreemptOrder& other) const {
    return key == other.key && cause == other.cause && reason == other.reason &&
           claimant_user == other.claimant_user;
  }
};

// The attempts to preempt now. `queue` is in ShareOrder's order (runs not yet ready are
// skipped); `in_use` counts every open attempt's slots by user; `now_ms` is monotonic.
std::vector<PreemptOrder> PlanPreemptions(const std::vector<QueuedRun>& queue,
                                          const std::vector<RunningAttempt>& running,
                                          const std::map<int64_t, WorkerRoom>& workers,
                                          const SlotsByUser& in_use, const SharingPolicy& policy,
                                          int64_t now_ms);

}  // namespace xmod::scheduling

#endif  // XMOD_COORDINATOR_SCHEDULING_PREEMPTION_H_
