// The outcome of an attempt (docs/worker-trainer-contract.md, "Exit codes"): how the worker
// turns the way a trainer ended — its exit status, whether it wrote its `finished` event, and
// the stop the worker asked for, if any — into the v1::Outcome of FinishRunRequest, and the
// names the coordinator stores those outcomes under. The rule is one table, kOutcomeRules,
// read top to bottom; the first row whose condition holds decides. LibTorch-free;
// thread-safe (no state).
#ifndef XMOD_TRAINER_CONTRACT_OUTCOME_H_
#define XMOD_TRAINER_CONTRACT_OUTCOME_H_

#include <string>
#include <string_view>

#include "xmod/v1/worker.pb.h"

namespace xmod {

// How an attempt's trainer ended, as the worker saw it.
struct AttemptEnd {
  int exit_code = 0;            // the code it exited with (signal == 0)
  int signal = 0;               // the signal that killed it; 0 if it exited
  bool finished_event = false;  // it wrote its `finished` event: the budget is spent
  // Set when the worker stopped or killed it: by an order (STOP: CANCELLED, PREEMPT or KILL:
  // PREEMPTED), a drain (PREEMPTED), a lapsed lease (PREEMPTED), a stall or refused metrics
  // (FAILED) or staleness (CANCELLED); with the reason the worker gave, if any.
  v1::Outcome stop_outcome = v1::OUTCOME_UNSPECIFIED;
  std::string stop_reason;
};

// Where a row's FinishRunRequest.error comes from.
enum class OutcomeError {
  kNone,            // no error
  kStopReason,      // AttemptEnd::stop_reason
  kFixed,           // the row's text
  kTrainerFailure,  // the trainer's own words: its stderr tail, else its exit status
};

// One row of the table: when `applies`, the attempt ends with `outcome` (UNSPECIFIED: the
// stop outcome) and the error of `error`.
struct OutcomeRule {
  const char* condition;  // the condition in words
  bool (*applies)(const AttemptEnd& end);
  v1::Outcome outcome;
  OutcomeError error;
  const char* text;  // the error for kFixed
};

// The rows, first match wins; the last one always applies.
//   condition                                     outcome        error
//   exit 0, and `finished` or no stop asked       SUCCEEDED      —
//   the worker asked it to stop                   the stop's     the stop reason
//   exit kExitLeaseExpired                        PREEMPTED      its lease lapsed
//   exit kExitPreempted                           PREEMPTED      SIGTERM from outside
//   anything else                                 FAILED         the trainer's stderr tail
extern const OutcomeRule kOutcomeRules[];
extern const int kOutcomeRuleCount;

// The outcome of an ended attempt, by kOutcomeRules.
struct AttemptOutcome {
  v1::Outcome outcome = v1::OUTCOME_UNSPECIFIED;
  // The error, except for kTrainerFailure, which the caller fills from the trainer's output.
  std::string error;
  OutcomeError error_source = OutcomeError::kNone;
  int rule = 0;  // the index of the row that decided
};
AttemptOutcome DecideOutcome(const AttemptEnd& end);

// The name the coordinator stores an outcome under (runs' and attempts' outcome columns):
// "succeeded", "failed", "cancelled" or "preempted"; "" for OUTCOME_UNSPECIFIED or a value
// this build does not know.
std::string_view StoredOutcomeName(v1::Outcome outcome);

}  // namespace xmod

#endif  // XMOD_TRAINER_CONTRACT_OUTCOME_H_
