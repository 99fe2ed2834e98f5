// See scheduler.h. This file: the Scheduler's core — its construction, the commit of an
// operation's writes (with the rollback of pending_changes.h), Acquire with the policy
// (placement.h) and the lease (leases.h). The rest, by concept: run_queue.cc (user actions),
// attempt_end.cc (FinishRun, lease expiry), heartbeats.cc (Register, Heartbeat), checkpoints.cc,
// rebuild.cc and sharing.cc.
#include "coordinator/scheduling/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "coordinator/scheduling/leases.h"
#include "glog/logging.h"

namespace xmod {

using scheduling::PendingChanges;
using scheduling::Placement;
using scheduling::RunEntry;

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(Store* store, Clock* clock,
                                                             ChangeFeed* feed,
                                                             CoordinatorMetrics* metrics,
                                                             MetricIngest* ingest,
                                                             const SchedulerOptions& options) {
  std::unique_ptr<Scheduler> scheduler(new Scheduler(store, clock, feed, metrics, ingest, options));
  if (absl::Status s = scheduler->Rebuild(); !s.ok()) return s;
  return scheduler;
}

Scheduler::Scheduler(Store* store, Clock* clock, ChangeFeed* feed, CoordinatorMetrics* metrics,
                     MetricIngest* ingest, const SchedulerOptions& options)
    : store_(store),
      clock_(clock),
      feed_(feed),
      metrics_(metrics),
      options_(options),
      workers_(options.lease_ttl_ms),
      ingest_(ingest) {}

int64_t Scheduler::BackoffMillis(int failures) const {
  return scheduling::BackoffMillis(failures, options_);
}

std::future<absl::Status> Scheduler::Submit(std::vector<Store::WriteFn> writes, bool bulk_lane) {
  Store::WriteFn all = [writes = std::move(writes)](Db& db) {
    for (const Store::WriteFn& write : writes) {
      if (absl::Status s = write(db); !s.ok()) return s;
    }
    return absl::OkStatus();
  };
  return bulk_lane ? store_->WriteBulk(std::move(all)) : store_->Write(std::move(all));
}

void Scheduler::Publish(const std::vector<Touched>& touched) {
  for (const Touched& t : touched) feed_->Publish(t.sweep_id, t.run_id);
}

std::vector<Scheduler::AttemptKey> Scheduler::EndingLocked(const PendingChanges& change) const {
  std::vector<AttemptKey> ending;
  for (const auto& [key, saved] : change.saved_attempts()) {
    if (saved.has_value() && live_.attempts.count(key) == 0) ending.push_back(key);
  }
  return ending;
}

void Scheduler::OpenToIngestLocked(const PendingChanges& change) {
  for (const auto& [key, saved] : change.saved_attempts()) {
    auto attempt = live_.attempts.find(key);
    auto run = live_.runs.find(key.first);
    if (saved.has_value() || attempt == live_.attempts.end() || run == live_.runs.end()) continue;
    ingest_->Open(
        key, {attempt->second.members.front().worker_id, run->second.sweep_id, run->second.name});
  }
  for (const auto& [run_id, saved] : change.saved_runs()) {
    auto run = live_.runs.find(run_id);
    if (run == live_.runs.end() || run->second.current_attempt == 0) continue;
    if (run->second.state == xmod::v1::CANCELLED) {
      ingest_->MarkCancelled({run_id, run->second.current_attempt});
    }
  }
}

absl::Status Scheduler::CommitLocked(std::vector<Store::WriteFn> writes,
                                     const PendingChanges& change) {
  // Ingest stops taking points of the attempts this ends before their end is queued, and
  // the end queues behind their batches still being written.
  const std::vector<AttemptKey> ending = EndingLocked(change);
  const bool behind_batches = ingest_->BeginClose(ending);
  absl::Status status =
      writes.empty() ? absl::OkStatus() : Submit(std::move(writes), behind_batches).get();
  ingest_->EndClose(ending, status.ok());
  if (status.ok()) {
    OpenToIngestLocked(change);
    if (metrics_ != nullptr) {
      for (const std::string& name : change.ended_runs()) metrics_->RunEnded(name);
    }
    return status;
  }
  // Put memory back as the database still has it.
  if (change.Restore(live_)) queue_changed_.SignalAll();
  LOG(WARNING) << "scheduler: a commit failed, memory left as stored: " << status;
  return status;
}

std::string Scheduler::CheckpointDir(int64_t sweep_id, int64_t run_id) const {
  return absl::StrCat(options_.checkpoint_root, "/sweep-", sweep_id, "/run-", run_id);
}

std::string Scheduler::PendingReason(int64_t run_id) {
  absl::MutexLock lock(&mu_);
  auto it = live_.runs.find(run_id);
  if (it == live_.runs.end() || it->second.state != xmod::v1::QUEUED) return "";
  return it->second.pending_reason;
}

std::optional<Placement> Scheduler::PlanLocked(int64_t poller, int64_t mono, int64_t* next_ready) {
  const std::vector<scheduling::QueuedRun> queue = ShareQueueLocked(workers_.KindOf(poller));
  const scheduling::PlacementClock clock{poller, mono, options_.lease_ttl_ms,
                                         options_.heartbeat_interval_ms};
  scheduling::PlacementPlan plan = scheduling::PlanPlacement(
      queue, workers_.entries(), scheduling::HeldRendezvous(live_, workers_), clock);
  for (const auto& [run_id, reason] : plan.pending_reasons) {
    live_.runs.at(run_id).pending_reason = reason;
  }
  *next_ready = plan.next_ready_ms;
  return std::move(plan.placement);
}

absl::StatusOr<std::vector<xmod::v1::Assignment>> Scheduler::LeaseLocked(const Placement& placement,
                                                                         int64_t arrived,
                                                                         int64_t* sweep_id) {
  // Memory changes are kept only once the database holds them.
  const int64_t now = clock_->NowMillis();
  const int64_t mono = clock_->MonotonicMillis();
  const int64_t run_id = placement.run_id;
  PendingChanges change;
  change.Save(live_, run_id);
  RunEntry& run = live_.runs.at(run_id);
  change.Save(live_, AttemptKey{run_id, run.attempts + 1});
  live_.queue.erase(scheduling::QueueKeyOf(run_id, run));
  run.state = xmod::v1::RUNNING;
  run.attempts += 1;
  run.current_attempt = run.attempts;
  *sweep_id = run.sweep_id;

  const xmod::v1::Assignment base =
      scheduling::BaseAssignment(run_id, run, CheckpointDir(run.sweep_id, run_id));
  const int world = std::max(1, run.spec.training().ranks());
  scheduling::Lease lease =
      scheduling::GrantLease(workers_, placement, base, world, mono, arrived, options_);
  lease.attempt.started_ms = mono;
  live_.attempts[{run_id, run.attempts}] = lease.attempt;
  const int64_t resumed_from = run.latest_checkpoint ? run.latest_checkpoint->step : 0;
  std::vector<Store::WriteFn> writes;
  writes.push_back(
      scheduling::StartAttemptWrite(*sweep_id, run_id, run, lease, resumed_from, now, options_));
  writes.push_back(SlotKindWriteLocked({run_id, run.attempts}, lease.attempt));
  if (absl::Status s = CommitLocked(std::move(writes), change); !s.ok()) return s;
  return std::move(lease.parts);
}

absl::Status Scheduler::PollLocked(const xmod::v1::AcquireRunRequest& request, int64_t arrived,
                                   absl::Time deadline,
                                   std::optional<xmod::v1::Assignment>* assignment,
                                   std::vector<Touched>* started) {
  const int64_t worker_id = request.worker_id();
  while (!shutdown_) {
    *assignment = scheduling::TakePart(live_, workers_, worker_id, arrived,
                                       clock_->MonotonicMillis(), options_);
    if (*assignment || request.free_slots().empty()) break;
    int64_t next_ready = -1;
    const int64_t now = clock_->MonotonicMillis();
    if (std::optional<Placement> placement = PlanLocked(worker_id, now, &next_ready)) {
      int64_t sweep_id = 0;
      absl::StatusOr<std::vector<xmod::v1::Assignment>> parts =
          LeaseLocked(*placement, arrived, &sweep_id);
      if (!parts.ok()) return parts.status();
      started->push_back({sweep_id, placement->run_id});
      if (placement->members.size() == 1) {
        *assignment = std::move(parts->front());
        break;
      }
      queue_changed_.SignalAll();  // wakes the other members' polls
      continue;                    // this worker's part, if any, is taken above
    }
    if (absl::Now() >= deadline) break;
    absl::Time wake = deadline;
    if (next_ready >= 0) wake = std::min(wake, absl::Now() + absl::Milliseconds(next_ready - now));
    queue_changed_.WaitWithDeadline(&mu_, wake);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<xmod::v1::Assignment>> Scheduler::Acquire(
    const xmod::v1::AcquireRunRequest& request) {
  const absl::Time deadline =
      absl::Now() + absl::Milliseconds(std::max<int64_t>(0, request.wait_ms()));
  // The lease lasts lease_ttl_ms from its grant; the worker counts from its request.
  const int64_t arrived = clock_->MonotonicMillis();
  const int64_t worker_id = request.worker_id();
  std::optional<xmod::v1::Assignment> assignment;
  std::vector<Touched> started;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (workers_.Find(worker_id) == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("unknown worker ", worker_id, ": register again"));
    }
    workers_.BeginPoll(worker_id, {request.free_slots().begin(), request.free_slots().end()});
    status = PollLocked(request, arrived, deadline, &assignment, &started);
    workers_.EndPoll(worker_id, clock_->MonotonicMillis());
  }
  if (!status.ok()) return status;
  if (assignment) {
    if (absl::Status s = MakeDirs(assignment->spec().checkpoint_dir()); !s.ok()) {
      LOG(WARNING) << "cannot create " << assignment->spec().checkpoint_dir() << " here (" << s
                   << "); the worker must";
    }
  }
  Publish(started);
  return assignment;
}

void Scheduler::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  queue_changed_.SignalAll();
}

std::optional<int64_t> Scheduler::LeaseExpiry(int64_t run_id, int attempt) {
  absl::MutexLock lock(&mu_);
  auto it = live_.attempts.find({run_id, attempt});
  if (it == live_.attempts.end()) return std::nullopt;
  int64_t earliest = it->second.members.front().lease_expires_ms;
  for (const scheduling::Member& m : it->second.members) {
    earliest = std::min(earliest, m.lease_expires_ms);
  }
  return earliest;
}

}  // namespace xmod
