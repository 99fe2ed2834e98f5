// SchedulerOptions: the lease, heartbeat, backoff, gang start, checkpoint and sharing
// (quotas, weights) settings of the
// Scheduler (scheduler.h), shared by its parts (placement, leases, retry policy, rebuild).
#ifndef XMOD_COORDINATOR_SCHEDULING_SCHEDULER_OPTIONS_H_
#define XMOD_COORDINATOR_SCHEDULING_SCHEDULER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "coordinator/scheduling/sharing_config.h"

namespace xmod {

struct SchedulerOptions {
  int64_t lease_ttl_ms = 30000;
  int64_t heartbeat_interval_ms = 2000;
  // Backoff before retry n (n = failures so far): base * 2^(n-1), at most max.
  int64_t backoff_base_ms = 2000;
  int64_t backoff_max_ms = 120000;
  // Each run checkpoints into <checkpoint_root>/sweep-<S>/run-<R>.
  std::string checkpoint_root = "checkpoints";
  // Lost leases (lease expiry, a worker re-registering without the attempt) requeue the run
  // at once without counting against max_attempts; past this many since the scheduler
  // started or the run was resumed, the run FAILs instead, so it cannot loop forever.
  int max_lost_attempts = 20;
  // A gang member that has not taken its part (AcquireRun) this long after the placement
  // ends the attempt as lost and releases every member.
  int64_t gang_start_timeout_ms = 30000;
  // Quotas, fair-share weights and preemption hysteresis (--sharing_config).
  scheduling::SharingPolicy sharing;
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_SCHEDULING_SCHEDULER_OPTIONS_H_
