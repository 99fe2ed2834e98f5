// The outcome table of outcome.h.
#include "trainer_contract/outcome.h"

#include <iterator>

#include "trainer_contract/exit_codes.h"

namespace xmod {
namespace {

bool Exited(const AttemptEnd& end, int code) { return end.signal == 0 && end.exit_code == code; }
bool StopAsked(const AttemptEnd& end) { return end.stop_outcome != v1::OUTCOME_UNSPECIFIED; }

}  // namespace

const OutcomeRule kOutcomeRules[] = {
    // A trainer that spent its budget succeeded even when a stop came too late to matter.
    {"exit 0, and the `finished` event or no stop asked",
     [](const AttemptEnd& end) {
       return Exited(end, kExitOk) && (end.finished_event || !StopAsked(end));
     },
     v1::OUTCOME_SUCCEEDED, OutcomeError::kNone, ""},
    {"the worker asked it to stop (order, drain, lease, stall, staleness)", StopAsked,
     v1::OUTCOME_UNSPECIFIED, OutcomeError::kStopReason, ""},
    // The trainer fenced itself off: its lease lapsed (e.g. this worker was frozen).
    {"exit kExitLeaseExpired", [](const AttemptEnd& end) { return Exited(end, kExitLeaseExpired); },
     v1::OUTCOME_PREEMPTED, OutcomeError::kFixed,
     "the trainer's lease lapsed; it stopped without writing a checkpoint"},
    // Someone else sent the trainer SIGTERM (a scheduler's scancel or preemption signals the
    // whole job): it checkpointed and stopped, as if the worker had asked.
    {"exit kExitPreempted", [](const AttemptEnd& end) { return Exited(end, kExitPreempted); },
     v1::OUTCOME_PREEMPTED, OutcomeError::kFixed,
     "the trainer was stopped by SIGTERM from outside the worker"},
    {"any other exit code or signal", [](const AttemptEnd&) { return true; }, v1::OUTCOME_FAILED,
     OutcomeError::kTrainerFailure, ""},
};
const int kOutcomeRuleCount = static_cast<int>(std::size(kOutcomeRules));

AttemptOutcome DecideOutcome(const AttemptEnd& end) {
  int rule = 0;
  while (!kOutcomeRules[rule].applies(end)) ++rule;  // the last row always applies
  const OutcomeRule& row = kOutcomeRules[rule];
  AttemptOutcome decided;
  decided.rule = rule;
  decided.outcome = row.outcome == v1::OUTCOME_UNSPECIFIED ? end.stop_outcome : row.outcome;
  decided.error_source = row.error;
  if (row.error == OutcomeError::kStopReason) decided.error = end.stop_reason;
  if (row.error == OutcomeError::kFixed) decided.error = row.text;
  return decided;
}

std::string_view StoredOutcomeName(v1::Outcome outcome) {
  switch (outcome) {
    case v1::OUTCOME_SUCCEEDED:
      return "succeeded";
    case v1::OUTCOME_FAILED:
      return "failed";
    case v1::OUTCOME_CANCELLED:
      return "cancelled";
    case v1::OUTCOME_PREEMPTED:
      return "preempted";
    default:
      return "";
  }
}

}  // namespace xmod
