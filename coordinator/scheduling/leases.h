// Leases (scheduler.h, "Gangs"): what a placement becomes once granted — an attempt with one
// member per worker, each with its lease and its part of the assignment — and the bookkeeping
// around it: the rendezvous ports open gangs hold, the slots leased off the workers' free
// ones, gang parts handed out when their worker polls, and the attempt's database rows.
#ifndef XMOD_COORDINATOR_SCHEDULING_LEASES_H_
#define XMOD_COORDINATOR_SCHEDULING_LEASES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/scheduling/live_state.h"
#include "coordinator/scheduling/placement.h"
#include "coordinator/scheduling/scheduler_options.h"
#include "coordinator/scheduling/worker_registry.h"
#include "coordinator/store/store.h"
#include "xmod/v1/worker.pb.h"

namespace xmod::scheduling {

// The rendezvous addresses open gangs hold (ports on `workers`).
std::set<std::string> HeldRendezvous(const LiveState& live, const WorkerRegistry& workers);

// The assignment every member's part starts from: run `run_id`'s next attempt
// (run.attempts, already counted), its spec with `checkpoint_dir` and the memory plan its
// out-of-memory failures reached (memory_plan.h), and its resume point and fallback.
xmod::v1::Assignment BaseAssignment(int64_t run_id, const RunEntry& run,
                                    const std::string& checkpoint_dir);

// A granted placement: the open attempt and each member's part (member 0's first).
struct Lease {
  AttemptEntry attempt;
  std::vector<xmod::v1::Assignment> parts;
};
// Grants `placement` of a run with `world` ranks from `base`: takes the members' slots off
// their workers' free slots and, for a gang, its port on member 0's host (the next gang there
// tries the one after it first). A single worker's lease lasts lease_ttl_ms from `mono` (its
// part's lease_ttl_ms counts from `arrived`, when the poll arrived); a gang's members have
// gang_start_timeout_ms to take their parts.
Lease GrantLease(WorkerRegistry& workers, const Placement& placement,
                 const xmod::v1::Assignment& base, int world, int64_t mono, int64_t arrived,
                 const SchedulerOptions& options);

// The database writes that start the attempt `lease` of `run` (id `run_id`, in sweep
// `sweep_id`): its row and members with the memory plan it runs with, the run RUNNING, an
// EVENT_ATTEMPT_STARTED event. `now` is the wall clock.
Store::WriteFn StartAttemptWrite(int64_t sweep_id, int64_t run_id, const RunEntry& run,
                                 const Lease& lease, int64_t resumed_from_step, int64_t now,
                                 const SchedulerOptions& options);

// A gang part placed for `worker_id` that it has not taken yet: marks it taken (its lease
// runs lease_ttl_ms from `mono`; the part's lease_ttl_ms counts from `arrived`) and returns
// it.
std::optional<xmod::v1::Assignment> TakePart(LiveState& live, WorkerRegistry& workers,
                                             int64_t worker_id, int64_t arrived, int64_t mono,
                                             const SchedulerOptions& options);

}  // namespace xmod::scheduling

#endif  // XMOD_COORDINATOR_SCHEDULING_LEASES_H_
