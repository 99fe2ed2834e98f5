// See scheduler.h. This file: the end of attempts — FinishRun from a worker, lease expiry,
// and EndAttemptLocked that moves a run on by its retry policy (retry_policy.h).
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/store/event_kinds.h"
#include "coordinator/store/event_rows.h"
#include "coordinator/store/sharing_rows.h"
#include "coordinator/store/store_writes.h"
#include "glog/logging.h"
#include "trainer_contract/exit_codes.h"

namespace xmod {

using scheduling::Member;
using scheduling::PendingChanges;
using scheduling::RunEntry;

void Scheduler::EndAttemptLocked(const AttemptKey& key, const std::string& outcome, Retry retry,
                                 int exit_code, const std::string& error, int64_t now, int64_t mono,
                                 std::vector<Store::WriteFn>* writes, std::vector<Touched>* touched,
                                 PendingChanges* change) {
  const auto [run_id, attempt] = key;
  change->Save(live_, key);
  change->Save(live_, run_id);
  if (auto run = live_.runs.find(run_id); run != live_.runs.end()) {
    live_.used_slot_ms[run->second.user] += scheduling::AttemptSlotMs(live_.attempts.at(key), mono);
  }
  live_.attempts.erase(key);
  writes->push_back([run_id = run_id, attempt = attempt, outcome, exit_code, error, now](Db& db) {
    return EndAttempt(db, run_id, attempt, outcome, exit_code, error, now);
  });
  auto it = live_.runs.find(run_id);
  if (it == live_.runs.end() || it->second.current_attempt != attempt) return;
  RunEntry& run = it->second;
  run.current_attempt = 0;
  touched->push_back({run.sweep_id, run_id});
  change->RunEnded(run.name);
  const int64_t sweep_id = run.sweep_id;
  const std::string event_text = scheduling::AttemptEventText(attempt, outcome, exit_code, error);
  scheduling::RunVerdict verdict;
  if (run.state == xmod::v1::CANCELLED) {
    // Its cancellation is already stored.
    verdict.update.run_id = run_id;
    verdict.event_kind = AttemptEndedKind(outcome);
  } else {
    verdict = scheduling::JudgeRun(run, run_id, outcome, retry, exit_code, event_text, now, mono,
                                   options_);
  }
  if (verdict.requeue) {
    EnqueueLocked(run_id, run);
  } else {
    live_.runs.erase(it);
  }
  writes->push_back([verdict, sweep_id, run_id = run_id, event_text, now](Db& db) {
    if (absl::Status s = UpdateRun(db, verdict.update); !s.ok()) return s;
    return InsertEvent(db, now, verdict.event_kind, sweep_id, run_id, event_text);
  });
}

Scheduler::Retry Scheduler::FinishRetryLocked(const xmod::v1::FinishRunRequest& request,
                                              const AttemptKey& key, size_t member,
                                              std::string* outcome, std::string* error,
                                              PendingChanges* change) {
  const scheduling::AttemptEntry& attempt = live_.attempts.at(key);
  *error = request.error();
  if (attempt.members.size() > 1) {
    *error =
        absl::StrCat("gang member ", member, " (", attempt.members[member].worker, "): ", *error);
  }
  const int64_t acked_seq = ingest_->AckedSeq(key);
  if (request.outcome() == xmod::v1::OUTCOME_SUCCEEDED && request.last_seq() > 0 &&
      acked_seq < request.last_seq()) {
    // Points the trainer produced are missing: not a success. The retry resumes from the
    // latest checkpoint, before which every point is durable, and produces the rest again.
    *outcome = "failed";
    *error = absl::StrCat("metrics incomplete: durable up to seq ", std::max<int64_t>(acked_seq, 0),
                          " of ", request.last_seq(), "; retrying from the latest checkpoint");
    LOG(WARNING) << "run " << request.run_id() << " attempt " << request.attempt() << ": "
                 << *error;
    return Retry::kFailure;
  }
  if (request.outcome() != xmod::v1::OUTCOME_FAILED) return Retry::kRequeue;
  auto run = live_.runs.find(request.run_id());
  if (run == live_.runs.end()) return Retry::kFailure;
  change->Save(live_, request.run_id());
  return scheduling::RetryOfFailure(run->second, request.exit_code());
}

absl::Status Scheduler::FinishRun(const xmod::v1::FinishRunRequest& request) {
  absl::StatusOr<std::string> outcome = scheduling::OutcomeName(request.outcome());
  if (!outcome.ok()) return outcome.status();
  if (request.last_seq() < 0) return absl::InvalidArgumentError("last_seq: must be >= 0");
  const int64_t now = clock_->NowMillis();
  const int64_t mono = clock_->MonotonicMillis();
  std::vector<Store::WriteFn> writes;
  std::vector<Touched> touched;
  absl::Status status;
  const bool out_of_memory =
      request.outcome() == xmod::v1::OUTCOME_FAILED && request.exit_code() == kExitOutOfMemory;
  {
    absl::MutexLock lock(&mu_);
    const AttemptKey key{request.run_id(), request.attempt()};
    auto it = live_.attempts.find(key);
    if (it == live_.attempts.end()) return absl::OkStatus();  // already ended (e.g. lost)
    const Member* member = scheduling::MemberOn(it->second, request.worker_id());
    if (member == nullptr) {
      std::vector<std::string> names;
      for (const Member& m : it->second.members) names.push_back(m.worker);
      return absl::FailedPreconditionError(absl::StrCat("attempt ", request.attempt(), " of run ",
                                                        request.run_id(), " belongs to worker ",
                                                        absl::StrJoin(names, ",")));
    }
    const size_t index = member - it->second.members.data();
    // Rank 0's outcome is the attempt's: another member's success ends nothing.
    if (index > 0 && request.outcome() == xmod::v1::OUTCOME_SUCCEEDED) return absl::OkStatus();
    PendingChanges change;
    std::string error;
    const Retry retry = FinishRetryLocked(request, key, index, &*outcome, &error, &change);
    EndAttemptLocked(key, *outcome, retry, request.exit_code(), error, now, mono, &writes, &touched,
                     &change);
    if (out_of_memory) {
      writes.push_back([](Db& db) { return AddToCounter(db, kOomExitsCounter, 1); });
    }
    if (request.peak_gpu_memory_bytes() > 0) {
      writes.push_back([key, index, bytes = request.peak_gpu_memory_bytes()](Db& db) {
        return SetMemberGpuPeak(db, key.first, key.second, static_cast<int>(index), bytes);
      });
    }
    status = CommitLocked(std::move(writes), change);
  }
  if (!status.ok()) return status;
  if (out_of_memory && metrics_ != nullptr) metrics_->AddOomExits(1);
  Publish(touched);
  return status;
}

std::vector<std::pair<Scheduler::AttemptKey, std::string>> Scheduler::LapsedLocked(
    int64_t mono) const {
  std::vector<std::pair<AttemptKey, std::string>> lapsed;  // and why
  for (const auto& [key, attempt] : live_.attempts) {
    const bool gang = attempt.members.size() > 1;
    for (size_t m = 0; m < attempt.members.size(); ++m) {
      const Member& member = attempt.members[m];
      if (member.lease_expires_ms >= mono) continue;
      if (!gang) {
        lapsed.emplace_back(key, "lease expired");
      } else if (member.delivered) {
        lapsed.emplace_back(
            key, absl::StrCat("lease of gang member ", m, " (", member.worker, ") expired"));
      } else {
        lapsed.emplace_back(key, absl::StrCat("gang member ", m, " (", member.worker,
                                              ") did not take its part within ",
                                              options_.gang_start_timeout_ms, " ms"));
      }
      break;
    }
  }
  return lapsed;
}

int Scheduler::ExpireLeases() {
  const int64_t now = clock_->NowMillis();
  const int64_t mono = clock_->MonotonicMillis();
  std::vector<Store::WriteFn> writes;
  std::vector<Touched> touched;
  int expired = 0;
  {
    absl::MutexLock lock(&mu_);
    const std::vector<std::pair<AttemptKey, std::string>> lapsed = LapsedLocked(mono);
    PendingChanges change;
    for (const auto& [key, reason] : lapsed) {
      LOG(WARNING) << "run " << key.first << " attempt " << key.second << ": " << reason;
      const Retry retry = scheduling::RetryOfLoss(live_, key, options_, change);
      EndAttemptLocked(key, "lost", retry, 0, reason, now, mono, &writes, &touched, &change);
    }
    if (metrics_ != nullptr) metrics_->SetWorkersConnected(workers_.CountLive(mono));
    if (!lapsed.empty()) {
      writes.push_back([lost = static_cast<int64_t>(lapsed.size())](Db& db) {
        return AddToCounter(db, kLeasesLostCounter, lost);
      });
      if (absl::Status s = CommitLocked(std::move(writes), change); !s.ok()) {
        LOG(ERROR) << "storing expired leases failed; will retry: " << s;
        return 0;
      }
      expired = static_cast<int>(lapsed.size());
    }
  }
  if (expired > 0) {
    if (metrics_ != nullptr) metrics_->AddLeasesExpired(expired);
    Publish(touched);
  }
  return expired;
}

}  // namespace xmod
