// Retry policy (scheduler.h, "Failures"): how an ended attempt moves its run on. The exit
// code's retry policy (trainer_contract/exit_codes.h) and the run's counts decide between a
// requeue at once, a retry after exponential backoff, and FAILED; a lost lease requeues
// until the run lost max_lost_attempts of them.
#ifndef XMOD_COORDINATOR_SCHEDULING_RETRY_POLICY_H_
#define XMOD_COORDINATOR_SCHEDULING_RETRY_POLICY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/scheduling/live_state.h"
#include "coordinator/scheduling/pending_changes.h"
#include "coordinator/scheduling/scheduler_options.h"
#include "coordinator/store/event_kinds.h"
#include "coordinator/store/store_writes.h"
#include "xmod/v1/worker.pb.h"

namespace xmod::scheduling {

// How an ended attempt moves its run on.
enum class Retry {
  kRequeue,  // at once, not counted as a failure (preempted)
  kFailure,  // with backoff, counted; FAILED once max_attempts failures are reached
  kNever,    // FAILED now: a retry would fail the same way
};

// Backoff before retry n (n = failures so far): base * 2^(n-1), at most max.
int64_t BackoffMillis(int failures, const SchedulerOptions& options);

// The stored outcome name of a FinishRun (StoredOutcomeName, trainer_contract/outcome.h);
// INVALID_ARGUMENT naming `outcome` when it is not set.
absl::StatusOr<std::string> OutcomeName(xmod::v1::Outcome outcome);

// The retry policy of a FAILED outcome with `exit_code` for `run`; counts an out-of-memory
// failure on the run, which is requeued with its next memory plan (memory_plan.h) while the
// ladder has one.
Retry RetryOfFailure(RunEntry& run, int exit_code);
// The retry of attempt `key` lost with its lease: a requeue that is not a failure, until the
// run lost options.max_lost_attempts leases. Counts the loss on the run (saved in `change`).
Retry RetryOfLoss(LiveState& live, const AttemptKey& key, const SchedulerOptions& options,
                  PendingChanges& change);

// The event text of attempt `attempt` ending with `outcome`: "attempt 2 failed (reason,
// exit 3): error".
std::string AttemptEventText(int attempt, const std::string& outcome, int exit_code,
                             const std::string& error);

// What ending its current attempt does to a run that is not cancelled.
struct RunVerdict {
  RunUpdate update;  // the run row's change (run_id set)
  // The event of the attempt's end (AttemptEndedKind), or EVENT_RUN_FAILED when it failed
  // the run.
  xmod::v1::EventKind event_kind = xmod::v1::EVENT_KIND_UNSPECIFIED;
  bool requeue = false;  // the run stays in memory and is queued again; else it ended
};
// The verdict on `run` (id `run_id`) whose current attempt ended with `outcome` and `retry`
// (`event_text` from AttemptEventText); counts the failure on `run` and sets its backoff.
// `now` is the wall clock, `mono` the monotonic one.
RunVerdict JudgeRun(RunEntry& run, int64_t run_id, const std::string& outcome, Retry retry,
                    int exit_code, const std::string& event_text, int64_t now, int64_t mono,
                    const SchedulerOptions& options);

}  // namespace xmod::scheduling

#endif  // XMOD_COORDINATOR_SCHEDULING_RETRY_POLICY_H_
