// Tests of the outcome table: each row, the order of the rows, and the stored names.
#include "trainer_contract/outcome.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer_contract/exit_codes.h"

namespace xmod {
namespace {

AttemptEnd Exit(int code) {
  AttemptEnd end;
  end.exit_code = code;
  return end;
}

AttemptEnd Signal(int signo) {
  AttemptEnd end;
  end.signal = signo;
  return end;
}

AttemptEnd Stopped(AttemptEnd end, v1::Outcome outcome, const std::string& reason = "") {
  end.stop_outcome = outcome;
  end.stop_reason = reason;
  return end;
}

// Expects `end` to be decided by row `rule` as `outcome` with `error` from `source`.
void ExpectDecided(const AttemptEnd& end, int rule, v1::Outcome outcome, OutcomeError source,
                   const std::string& error = "") {
  const AttemptOutcome decided = DecideOutcome(end);
  EXPECT_EQ(decided.rule, rule) << kOutcomeRules[decided.rule].condition;
  EXPECT_EQ(decided.outcome, outcome);
  EXPECT_EQ(decided.error_source, source);
  EXPECT_EQ(decided.error, error);
}

TEST(OutcomeTest, ExitZeroWithoutAStopSucceeds) {
  ExpectDecided(Exit(kExitOk), 0, v1::OUTCOME_SUCCEEDED, OutcomeError::kNone);
}

TEST(OutcomeTest, ExitZeroAfterFinishingSucceedsDespiteAStop) {
  AttemptEnd end = Stopped(Exit(kExitOk), v1::OUTCOME_CANCELLED, "STOP order");
  end.finished_event = true;
  ExpectDecided(end, 0, v1::OUTCOME_SUCCEEDED, OutcomeError::kNone);
}

TEST(OutcomeTest, AStopDecidesWithItsReason) {
  // Exit 0 without `finished`: it checkpointed and stopped as asked.
  ExpectDecided(Stopped(Exit(kExitOk), v1::OUTCOME_CANCELLED), 1, v1::OUTCOME_CANCELLED,
                OutcomeError::kStopReason);
  ExpectDecided(Stopped(Exit(kExitPreempted), v1::OUTCOME_PREEMPTED), 1, v1::OUTCOME_PREEMPTED,
                OutcomeError::kStopReason);
  // A kill the worker decided on wins over the signal it sent and over the exit codes below.
  ExpectDecided(Stopped(Signal(9), v1::OUTCOME_FAILED, "no step progress"), 1, v1::OUTCOME_FAILED,
                OutcomeError::kStopReason, "no step progress");
  ExpectDecided(Stopped(Exit(kExitLeaseExpired), v1::OUTCOME_CANCELLED, "stale"), 1,
                v1::OUTCOME_CANCELLED, OutcomeError::kStopReason, "stale");
}

TEST(OutcomeTest, ALapsedLeaseIsAPreemption) {
  ExpectDecided(Exit(kExitLeaseExpired), 2, v1::OUTCOME_PREEMPTED, OutcomeError::kFixed,
                "the trainer's lease lapsed; it stopped without writing a checkpoint");
}

TEST(OutcomeTest, ASigtermFromOutsideIsAPreemption) {
  ExpectDecided(Exit(kExitPreempted), 3, v1::OUTCOME_PREEMPTED, OutcomeError::kFixed,
                "the trainer was stopped by SIGTERM from outside the worker");
}

TEST(OutcomeTest, AnythingElseFailsWithTheTrainersOwnWords) {
  for (const AttemptEnd& end : {Exit(kExitFailure), Exit(kExitDiverged), Exit(kExitOutOfMemory),
                                Exit(127), Signal(9), Signal(11)}) {
    SCOPED_TRACE(absl::StrCat("exit code ", end.exit_code, ", signal ", end.signal));
    ExpectDecided(end, kOutcomeRuleCount - 1, v1::OUTCOME_FAILED, OutcomeError::kTrainerFailure);
  }
}

TEST(OutcomeTest, ASignalIsNeverAnExitCode) {
  // Killed by signal 7 is not kExitLeaseExpired, nor by 0 a success.
  EXPECT_EQ(DecideOutcome(Signal(kExitLeaseExpired)).outcome, v1::OUTCOME_FAILED);
  AttemptEnd killed = Signal(15);
  killed.finished_event = true;
  EXPECT_EQ(DecideOutcome(killed).outcome, v1::OUTCOME_FAILED);
}

TEST(OutcomeTest, EveryRowHasAConditionInWords) {
  std::set<std::string> conditions;
  for (int i = 0; i < kOutcomeRuleCount; ++i) {
    EXPECT_FALSE(std::string(kOutcomeRules[i].condition).empty()) << i;
    conditions.insert(kOutcomeRules[i].condition);
  }
  EXPECT_EQ(conditions.size(), static_cast<size_t>(kOutcomeRuleCount));
}

TEST(OutcomeTest, StoredNames) {
  EXPECT_EQ(StoredOutcomeName(v1::OUTCOME_SUCCEEDED), "succeeded");
  EXPECT_EQ(StoredOutcomeName(v1::OUTCOME_FAILED), "failed");
  EXPECT_EQ(StoredOutcomeName(v1::OUTCOME_CANCELLED), "cancelled");
  EXPECT_EQ(StoredOutcomeName(v1::OUTCOME_PREEMPTED), "preempted");
  EXPECT_EQ(StoredOutcomeName(v1::OUTCOME_UNSPECIFIED), "");
  EXPECT_EQ(StoredOutcomeName(static_cast<v1::Outcome>(99)), "");
}

}  // namespace
}  // namespace xmod
