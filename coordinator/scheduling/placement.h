// Gang placement, the pure core of the scheduler's policy (scheduler.h, "Policy"): given a
// view of the queue, the workers and the clock, which run the polling worker should start
// now and on which workers and slots, which runs ahead of it hold a reservation, and whether
// the placement is a backfill behind one. No lock, no store: the Scheduler builds the view
// under its lock and applies the plan (PendingReason, the lease).
#ifndef XMOD_COORDINATOR_SCHEDULING_PLACEMENT_H_
#define XMOD_COORDINATOR_SCHEDULING_PLACEMENT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/scheduling/live_state.h"
#include "coordinator/scheduling/worker_registry.h"
#include "xmod/v1/types.pb.h"

namespace xmod::scheduling {

// A queued run as the policy sees it, in queue order (priority, then FIFO).
struct QueuedRun {
  int64_t run_id = 0;
  int64_t not_before_ms = 0;  // monotonic; not placed before (backoff)
  int members = 1;            // workers it spans (MembersNeeded)
  int slots_per_member = 1;   // slots on each (SlotsPerMember)
  std::string user;           // who submitted its sweep (sharing_policy.h)
  int priority = 0;
  // Placing it takes its user past a quota (sharing_policy.h): it only borrows idle slots,
  // so it never reserves workers and never preempts.
  bool borrowing = false;
};
// Workers a run spans: ranks / ranks_per_worker for a gang, else 1.
int MembersNeeded(const xmod::v1::RunSpec& spec);
// Slots a run occupies on each of its workers: ranks_per_worker for a gang, else every rank
// (training.ranks, 0 = 1).
int SlotsPerMember(const xmod::v1::RunSpec& spec);
QueuedRun QueuedRunOf(int64_t run_id, const RunEntry& run);

// The moment and the worker the policy plans for.
struct PlacementClock {
  int64_t poller = 0;  // the worker asking for a run
  int64_t now_ms = 0;  // monotonic
  // A worker is live while seen within lease_ttl_ms; its free slots are current while it
  // polls or stopped polling at most heartbeat_interval_ms ago.
  int64_t lease_ttl_ms = 0;
  int64_t heartbeat_interval_ms = 0;
};

// Where a run goes: one worker's slots per member (member 0 first).
struct Placement {
  int64_t run_id = 0;
  std::vector<std::pair<int64_t, std::vector<int32_t>>> members;  // (worker id, slots)
  int32_t port = 0;  // a gang's rendezvous port on member 0, free when planned
  bool operator==(const Placement& other) const {
    return run_id == other.run_id && members == other.members && port == other.port;
  }
};
// Workers held for a run that could not be placed: nothing behind it is leased on them.
struct Reservation {
  int64_t run_id = 0;
  std::vector<int64_t> workers;  // closest to fitting first
  bool operator==(const Reservation& other) const {
    return run_id == other.run_id && workers == other.workers;
  }
};
struct PlacementPlan {
  std::optional<Placement> placement;  // the run to start now, if any
  // Whether `placement` starts with a reservation ahead of it in the queue.
  bool backfill = false;
  std::vector<Reservation> reservations;  // in queue order
  // Every gang the policy passed over, with why it waits where known (else empty).
  std::vector<std::pair<int64_t, std::string>> pending_reasons;
  int64_t next_ready_ms = -1;  // the earliest backoff end among runs passed over (-1: none)
};

// The policy: the first run of `queue` (in ShareOrder's order) to place for `clock.poller`,
// scanning in order. A
// single-worker run goes on the poller's first free slots, or reserves the poller when it
// fits its size but not its free slots now; a gang goes on distinct ready workers not
// reserved ahead, member 0 (the poller if it can) with a rendezvous port not in `held`, or
// reserves the live workers closest to fitting; a borrowing run never reserves. `workers`
// must hold clock.poller.
PlacementPlan PlanPlacement(const std::vector<QueuedRun>& queue,
                            const std::map<int64_t, WorkerEntry>& workers,
                            const std::set<std::string>& held, const PlacementClock& clock);

// The first port of `worker`'s declared range, round robin from its next_port, whose
// address is not in `held`; nullopt when it declared none or every one is held.
std::optional<int32_t> FreePort(const WorkerEntry& worker, const std::set<std::string>& held);

}  // namespace xmod::scheduling

#endif  // XMOD_COORDINATOR_SCHEDULING_PLACEMENT_H_
