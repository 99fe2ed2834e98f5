// See scheduler.h, "Sharing". This file: a cluster shared by a lab — the users' slots in use,
// the queue in share order (share_order.h) for the placement policy, the preemption pass
// (preemption.h) and what a lease and a restart record and restore of it.
#include <algorithm>
#include <utility>

#include "coordinator/scheduling/preemption.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/store/event_rows.h"
#include "coordinator/store/sharing_rows.h"
#include "coordinator/store/store_writes.h"
#include "glog/logging.h"

namespace xmod {

using scheduling::PendingChanges;

scheduling::SlotsByUser Scheduler::InUseLocked() const {
  scheduling::SlotsByUser in_use;
  for (const auto& [key, attempt] : live_.attempts) {
    auto run = live_.runs.find(key.first);
    if (run == live_.runs.end()) continue;
    for (const scheduling::Member& m : attempt.members) {
      in_use[run->second.user].Of(workers_.KindOf(m.worker_id)) += static_cast<int>(m.slots.size());
    }
  }
  return in_use;
}

std::vector<scheduling::QueuedRun> Scheduler::ShareQueueLocked(xmod::v1::SlotKind kind) const {
  std::vector<scheduling::QueuedRun> queue;
  queue.reserve(live_.queue.size());
  for (const scheduling::QueueKey& key : live_.queue) {
    const int64_t run_id = std::get<2>(key);
    queue.push_back(scheduling::QueuedRunOf(run_id, live_.runs.at(run_id)));
  }
  // Ended attempts' use, plus the open attempts' so far.
  scheduling::UsedByUser used = live_.used_slot_ms;
  const int64_t mono = clock_->MonotonicMillis();
  for (const auto& [key, attempt] : live_.attempts) {
    auto run = live_.runs.find(key.first);
    if (run == live_.runs.end()) continue;
    used[run->second.user] += scheduling::AttemptSlotMs(attempt, mono);
  }
  return scheduling::ShareOrder(queue, InUseLocked(), used, kind, options_.sharing);
}

Store::WriteFn Scheduler::SlotKindWriteLocked(const AttemptKey& key,
                                              const scheduling::AttemptEntry& attempt) const {
  std::vector<std::pair<std::string, int>> kinds;  // by member: (kind, cores)
  for (const scheduling::Member& m : attempt.members) {
    const bool gpu = workers_.KindOf(m.worker_id) == xmod::v1::CUDA;
    kinds.emplace_back(gpu ? "cuda" : "cpu", gpu ? 0 : workers_.CoresOf(m.worker_id, m.slots));
  }
  return [key, kinds](Db& db) {
    for (size_t m = 0; m < kinds.size(); ++m) {
      if (absl::Status s = SetMemberSlotKind(db, key.first, key.second, static_cast<int>(m),
                                             kinds[m].first, kinds[m].second);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  };
}

std::vector<scheduling::RunningAttempt> Scheduler::RunningLocked() const {
  std::vector<scheduling::RunningAttempt> running;
  for (const auto& [key, attempt] : live_.attempts) {
    auto run = live_.runs.find(key.first);
    if (run == live_.runs.end() || run->second.state != xmod::v1::RUNNING ||
        run->second.current_attempt != key.second) {
      continue;  // ending: cancelled or superseded
    }
    scheduling::RunningAttempt& a = running.emplace_back();
    a.key = key;
    a.user = run->second.user;
    a.priority = run->second.priority;
    a.preemptible = run->second.preemptible;
    a.ordered = !attempt.preempt_reason.empty();
    a.started_ms = attempt.started_ms;
    a.checkpointed_ms = attempt.checkpointed_ms;
    a.kind = workers_.KindOf(attempt.members.front().worker_id);
    for (const scheduling::Member& m : attempt.members) {
      a.members.emplace_back(m.worker_id, static_cast<int>(m.slots.size()));
    }
  }
  return running;
}

std::map<int64_t, scheduling::WorkerRoom> Scheduler::RoomsLocked(int64_t mono) const {
  std::map<int64_t, int> held;
  for (const auto& [key, attempt] : live_.attempts) {
    for (const scheduling::Member& m : attempt.members) {
      held[m.worker_id] += static_cast<int>(m.slots.size());
    }
  }
  std::map<int64_t, scheduling::WorkerRoom> rooms;
  for (const auto& [id, worker] : workers_.entries()) {
    if (!workers_.IsLive(worker, mono) || worker.leaving) continue;
    scheduling::WorkerRoom& room = rooms[id];
    room.slots = static_cast<int>(worker.slots.size());
    room.free = std::max(0, room.slots - held[id]);
    room.kind = workers_.KindOf(id);
  }
  return rooms;
}

int Scheduler::Preempt() {
  const int64_t now = clock_->NowMillis();
  const int64_t mono = clock_->MonotonicMillis();
  std::vector<scheduling::PreemptOrder> orders;
  std::vector<Touched> touched;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (live_.queue.empty() || workers_.empty()) return 0;
    const std::map<int64_t, scheduling::WorkerRoom> rooms = RoomsLocked(mono);
    const xmod::v1::SlotKind kind =
        rooms.empty() ? xmod::v1::CPU : workers_.KindOf(rooms.begin()->first);
    orders = scheduling::PlanPreemptions(ShareQueueLocked(kind), RunningLocked(), rooms,
                                         InUseLocked(), options_.sharing, mono);
    if (orders.empty()) return 0;
    PendingChanges change;
    std::vector<Store::WriteFn> writes;
    for (const scheduling::PreemptOrder& order : orders) {
      change.Save(live_, order.key);
      live_.attempts.at(order.key).preempt_reason = order.reason;
      const int64_t sweep_id = live_.runs.at(order.key.first).sweep_id;
      touched.push_back({sweep_id, order.key.first});
      LOG(INFO) << "run " << order.key.first << " attempt " << order.key.second << ": "
                << order.reason;
      writes.push_back([order, sweep_id, now](Db& db) {
        if (absl::Status s = SetPreemptReason(db, order.key.first, order.key.second, order.reason);
            !s.ok()) {
          return s;
        }
        if (absl::Status s = AddToCounter(db, kPreemptionsCounterPrefix + order.cause, 1);
            !s.ok()) {
          return s;
        }
        return InsertEvent(db, now, xmod::v1::EVENT_RUN_PREEMPT_ORDERED, sweep_id, order.key.first,
                           order.reason, order.claimant_user);
      });
    }
    status = CommitLocked(std::move(writes), change);
  }
  if (!status.ok()) {
    LOG(WARNING) << "storing PREEMPT orders failed; the next pass retries: " << status;
    return 0;
  }
  if (metrics_ != nullptr) {
    for (const scheduling::PreemptOrder& order : orders) metrics_->AddPreemptions(order.cause, 1);
  }
  Publish(touched);
  return static_cast<int>(orders.size());
}

absl::Status Scheduler::RestoreSharing(int64_t mono,
                                       const std::map<std::string, int64_t>& counters) {
  absl::StatusOr<SharingSnapshot> snapshot = absl::InternalError("not read");
  if (absl::Status s = store_->Read([&](Db& db) {
        snapshot = LoadSharingSnapshot(db, clock_->NowMillis());
        return snapshot.status();
      });
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  for (auto& [run_id, run] : live_.runs) {
    if (auto it = snapshot->submitter.find(run_id); it != snapshot->submitter.end()) {
      run.user = it->second;
    }
    if (auto it = snapshot->preemptible.find(run_id); it != snapshot->preemptible.end()) {
      run.preemptible = it->second;
    }
  }
  live_.used_slot_ms = snapshot->used_slot_ms;
  for (auto& [key, attempt] : live_.attempts) {
    // The hysteresis counts from the restart: what the attempt did before is not known.
    attempt.started_ms = mono;
    if (auto it = snapshot->preempt_reason.find(key); it != snapshot->preempt_reason.end()) {
      attempt.preempt_reason = it->second;
    }
  }
  if (metrics_ != nullptr) {
    for (const char* cause : {"priority", "quota"}) {
      auto it = counters.find(std::string(kPreemptionsCounterPrefix) + cause);
      if (it != counters.end()) metrics_->AddPreemptions(cause, it->second);
    }
  }
  return absl::OkStatus();
}

}  // namespace xmod
