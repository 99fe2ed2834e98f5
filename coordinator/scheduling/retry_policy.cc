// See retry_policy.h.
#include "coordinator/scheduling/retry_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/scheduling/memory_plan.h"
#include "glog/logging.h"
#include "trainer_contract/exit_codes.h"
#include "trainer_contract/outcome.h"

namespace xmod::scheduling {
namespace {

// Why a run FAILED, after the event text of its last attempt.
std::string FailedRunError(const RunEntry& run, const std::string& outcome, Retry retry,
                           int exit_code, const std::string& event_text) {
  if (retry != Retry::kNever) {
    return absl::StrCat(event_text, " (", run.failures, " of ", run.max_attempts,
                        " attempts failed)");
  }
  if (outcome == "lost") {
    return absl::StrCat(event_text, " (", run.lost, " leases lost: not requeued again)");
  }
  if (exit_code == kExitOutOfMemory) {
    return absl::StrCat(event_text, " (out of memory ", run.oom_failures,
                        " times, the last with the smallest memory plan: not retried)");
  }
  return absl::StrCat(event_text, " (not retried: a retry would fail the same way)");
}

}  // namespace

int64_t BackoffMillis(int failures, const SchedulerOptions& options) {
  int64_t backoff = options.backoff_base_ms;
  for (int i = 1; i < failures && backoff < options.backoff_max_ms; ++i) backoff *= 2;
  return std::min(backoff, options.backoff_max_ms);
}

absl::StatusOr<std::string> OutcomeName(xmod::v1::Outcome outcome) {
  std::string name(StoredOutcomeName(outcome));
  if (name.empty()) return absl::InvalidArgumentError("outcome: must be set");
  return name;
}

Retry RetryOfFailure(RunEntry& run, int exit_code) {
  switch (RetryPolicyOf(exit_code)) {
    case ExitRetry::kNever:
      return Retry::kNever;
    case ExitRetry::kLessMemory:
      // A smaller plan is a different configuration, not a repeat: requeued at once and not
      // counted against max_attempts; the ladder is finite (memory_plan.h).
      run.oom_failures += 1;
      return MemoryPlanAfter(run.spec.training(), run.oom_failures) ? Retry::kRequeue
                                                                    : Retry::kNever;
    case ExitRetry::kRequeue:
      return Retry::kRequeue;
    case ExitRetry::kRetry:
      break;
  }
  return Retry::kFailure;
}

Retry RetryOfLoss(LiveState& live, const AttemptKey& key, const SchedulerOptions& options,
                  PendingChanges& change) {
  change.Save(live, key.first);
  auto run = live.runs.find(key.first);
  if (run == live.runs.end() || run->second.current_attempt != key.second) return Retry::kRequeue;
  run->second.lost += 1;
  if (run->second.lost <= options.max_lost_attempts) return Retry::kRequeue;
  LOG(WARNING) << "run " << key.first << " lost " << run->second.lost
               << " leases: failing it instead of requeueing";
  return Retry::kNever;
}

std::string AttemptEventText(int attempt, const std::string& outcome, int exit_code,
                             const std::string& error) {
  const std::string reason = ExitReason(exit_code);
  return absl::StrCat("attempt ", attempt, " ", outcome,
                      reason.empty() || outcome != "failed"
                          ? ""
                          : absl::StrCat(" (", reason, ", exit ", exit_code, ")"),
                      error.empty() ? "" : ": ", error);
}

RunVerdict JudgeRun(RunEntry& run, int64_t run_id, const std::string& outcome, Retry retry,
                    int exit_code, const std::string& event_text, int64_t now, int64_t mono,
                    const SchedulerOptions& options) {
  RunVerdict verdict;
  RunUpdate& u = verdict.update;
  u.run_id = run_id;
  verdict.event_kind = AttemptEndedKind(outcome);
  if (outcome == "succeeded") {
    u.state = xmod::v1::SUCCEEDED;
    u.finished_ms = now;
    u.error = "";
    return verdict;
  }
  if (outcome == "cancelled") {
    u.state = xmod::v1::CANCELLED;
    u.finished_ms = now;
    return verdict;
  }
  if (exit_code == kExitOutOfMemory && outcome == "failed") {
    u.oom_failures = run.oom_failures;  // chooses the next attempt's memory plan
    u.error = event_text;
  }
  const bool failure = retry != Retry::kRequeue;
  if (failure) {
    run.failures += 1;
    u.failures = run.failures;
    u.error = event_text;
  }
  if (retry == Retry::kNever || (failure && run.failures >= run.max_attempts)) {
    u.state = xmod::v1::FAILED;
    u.finished_ms = now;
    u.error = FailedRunError(run, outcome, retry, exit_code, event_text);
    verdict.event_kind = xmod::v1::EVENT_RUN_FAILED;
    return verdict;
  }
  const int64_t backoff = failure ? BackoffMillis(run.failures, options) : 0;
  run.not_before_ms = mono + backoff;
  u.state = xmod::v1::QUEUED;
  u.not_before_ms = now + backoff;
  verdict.requeue = true;
  return verdict;
}

}  // namespace xmod::scheduling
