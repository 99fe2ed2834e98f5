// See scheduler.h. This file: the worker's side of the run queue — registration (into the
// WorkerRegistry, once stored) and heartbeats (liveness, lease renewal, orders, progress).
#include <algorithm>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/store/event_rows.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/store_writes.h"
#include "glog/logging.h"

namespace xmod {

using scheduling::Member;
using scheduling::PendingChanges;
using scheduling::RunEntry;

namespace {

// The failure of a write the database could not take (a full or failing volume: Store),
// as opposed to one the request itself caused.
bool IsStorageFault(const absl::Status& status) {
  return absl::IsResourceExhausted(status) || absl::IsUnavailable(status);
}

void AddOrder(xmod::v1::HeartbeatResponse* response, const xmod::v1::RunningAttempt& running,
              xmod::v1::OrderAction action) {
  xmod::v1::Order* order = response->add_orders();
  order->set_run_id(running.run_id());
  order->set_attempt(running.attempt());
  order->set_action(action);
}

}  // namespace

absl::StatusOr<xmod::v1::RegisterResponse> Scheduler::Register(
    const xmod::v1::RegisterRequest& request) {
  if (absl::Status s = scheduling::CheckRegistration(request); !s.ok()) return s;
  // The address gangs reach it at: as advertised, else (no address seen) its hostname.
  xmod::v1::RegisterRequest registration = request;
  if (registration.advertise_host().empty()) registration.set_advertise_host(request.hostname());
  const int64_t now = clock_->NowMillis();
  int64_t worker_id = 0;
  // The id comes from the database (stable across re-registrations and restarts).
  absl::Status status = store_->WriteAndWait([&](Db& db) {
    absl::StatusOr<int64_t> id = UpsertWorker(db, registration, now);
    if (!id.ok()) return id.status();
    worker_id = *id;
    return InsertEvent(db, now, xmod::v1::EVENT_WORKER_REGISTERED, 0, 0,
                       absl::StrCat(request.worker_name(), " (", request.hostname(), ") with ",
                                    request.slots_size(), " slots"));
  });
  if (!status.ok()) return status;
  {
    absl::MutexLock lock(&mu_);
    workers_.Register(worker_id, registration, clock_->MonotonicMillis());
  }
  LOG(INFO) << "worker " << request.worker_name() << " registered as " << worker_id << " with "
            << request.slots_size() << " slots";
  xmod::v1::RegisterResponse response;
  response.set_worker_id(worker_id);
  response.set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
  response.set_lease_ttl_ms(options_.lease_ttl_ms);
  return response;
}

void Scheduler::RenewListedLocked(const xmod::v1::HeartbeatRequest& request, int64_t now,
                                  HeartbeatWork* work, xmod::v1::HeartbeatResponse* response) {
  const int64_t worker_id = request.worker_id();
  for (const xmod::v1::RunningAttempt& running : request.running()) {
    const AttemptKey key{running.run_id(), running.attempt()};
    work->listed.insert(key);
    auto attempt = live_.attempts.find(key);
    auto run = live_.runs.find(running.run_id());
    const Member* member = attempt == live_.attempts.end()
                               ? nullptr
                               : scheduling::MemberOn(attempt->second, worker_id);
    if (member == nullptr || run == live_.runs.end() ||
        run->second.current_attempt != running.attempt()) {
      // Lost, finished or someone else's: the child must stop at once, writing nothing
      // (another attempt may own the run now).
      AddOrder(response, running, xmod::v1::KILL);
      continue;
    }
    work->renewed.push_back(key);
    work->writes.push_back([key, expires = now + options_.lease_ttl_ms](Db& db) {
      return RenewLease(db, key.first, key.second, expires);
    });
    if (run->second.state == xmod::v1::CANCELLED) {
      AddOrder(response, running, xmod::v1::STOP);
      continue;
    }
    // Under a PREEMPT order (preemption.h) every member is told at each heartbeat until the
    // attempt ends; the first member's PREEMPTED report ends it as a whole.
    if (!attempt->second.preempt_reason.empty()) AddOrder(response, running, xmod::v1::PREEMPT);
    if (running.has_progress() && member == &attempt->second.members.front()) {
      // Only member 0 runs rank 0, whose events carry the progress.
      const xmod::v1::Progress& progress = running.progress();
      // Losses come from durable metric points (ReportMetrics); a heartbeat's snapshot
      // can predate the last evaluation, so it moves only the position and the rate.
      xmod::v1::Progress position = progress;
      position.clear_train_loss();
      position.clear_val_loss();
      work->writes.push_back([run_id = running.run_id(), position](Db& db) {
        return UpdateProgress(db, run_id, position);
      });
      work->touched.push_back({run->second.sweep_id, running.run_id()});
      work->progress_gauges.emplace_back(running.run_id(), progress);
    }
  }
}

std::vector<Scheduler::AttemptKey> Scheduler::OrphanedLocked(
    int64_t worker_id, const std::set<AttemptKey>& listed) const {
  const int64_t epoch = workers_.Find(worker_id)->epoch;
  std::vector<AttemptKey> orphaned;
  for (const auto& [key, attempt] : live_.attempts) {
    const Member* member = scheduling::MemberOn(attempt, worker_id);
    if (member != nullptr && member->delivered && member->worker_epoch < epoch &&
        listed.count(key) == 0) {
      orphaned.push_back(key);
    }
  }
  return orphaned;
}

void Scheduler::ApplyHeartbeatLocked(int64_t worker_id, int64_t mono, const HeartbeatWork& work) {
  // In the hold of the lock that listed the renewals (Heartbeat), so each is still open; the
  // check below keeps that true for any other caller.
  if (const scheduling::WorkerEntry* worker = workers_.Find(worker_id)) {
    if (work.leaving && !worker->leaving) {
      LOG(INFO) << "worker " << worker->name << " (" << worker_id
                << ") drains: its slots are no longer room for queued runs";
    }
    workers_.Seen(worker_id, mono, work.leaving);
    for (const AttemptKey& key : work.renewed) {
      auto attempt = live_.attempts.find(key);
      Member* member = attempt == live_.attempts.end()
                           ? nullptr
                           : scheduling::MemberOn(attempt->second, worker_id);
      if (member == nullptr) continue;
      member->lease_expires_ms = std::max(member->lease_expires_ms, mono + options_.lease_ttl_ms);
      // Listed attempts now belong to the current registration.
      member->worker_epoch = worker->epoch;
    }
  }
  // Under the lock that ends runs (CommitLocked), so a heartbeat in flight when its run
  // finished cannot bring the run's series back.
  if (metrics_ == nullptr) return;
  for (const auto& [run_id, progress] : work.progress_gauges) {
    auto run = live_.runs.find(run_id);
    if (run == live_.runs.end() || run->second.state != xmod::v1::RUNNING) continue;
    metrics_->SetRunProgress(run->second.name, progress.flops(), progress.train_loss());
  }
}

absl::StatusOr<xmod::v1::HeartbeatResponse> Scheduler::Heartbeat(
    const xmod::v1::HeartbeatRequest& request) {
  const int64_t now = clock_->NowMillis();
  const int64_t mono = clock_->MonotonicMillis();
  xmod::v1::HeartbeatResponse response;
  HeartbeatWork work;
  std::future<absl::Status> done;
  absl::Status status;
  bool committed = false;
  const int64_t worker_id = request.worker_id();
  {
    absl::MutexLock lock(&mu_);
    if (workers_.Find(worker_id) == nullptr) {
      response.set_reregister(true);
      return response;
    }
    work.writes.push_back([worker_id, now](Db& db) { return TouchWorker(db, worker_id, now); });
    work.leaving = request.leaving();
    // The worker counts its lease from its request; the renewal counts from the arrival.
    response.set_lease_ttl_ms(options_.lease_ttl_ms);
    RenewListedLocked(request, now, &work, &response);
    // After a re-registration, attempts begun earlier that the worker no longer lists ended
    // with the worker's previous life. Ending them changes the queue: committed under the
    // lock, memory kept only if the commit succeeds.
    const std::vector<AttemptKey> orphaned = OrphanedLocked(worker_id, work.listed);
    if (!orphaned.empty()) {
      PendingChanges change;
      for (const AttemptKey& key : orphaned) {
        const Retry retry = scheduling::RetryOfLoss(live_, key, options_, change);
        EndAttemptLocked(key, "lost", retry, 0, "worker re-registered without it", now, mono,
                         &work.writes, &work.touched, &change);
      }
      status = CommitLocked(std::move(work.writes), change);
      committed = true;
      if (!status.ok()) return status;
    } else {
      done = Submit(std::move(work.writes));
    }
    // Renewals and liveness take effect now, in this one hold of the lock, before their rows
    // are stored: nothing reads the stored lease times while this coordinator runs (a
    // restarted one gives every open attempt a TTL of grace), and a second hold after the
    // commit made each heartbeat wait for the lock twice (docs/architecture.md, "The
    // scheduler's owners").
    ApplyHeartbeatLocked(worker_id, mono, work);
  }
  if (!committed) status = done.get();
  if (!status.ok()) {
    // A database that cannot be written (a full or failing volume) fails the worker's
    // heartbeat row and stored renewals, not its running attempts: their leases are renewed
    // in memory, their metric points wait in the worker's spill, and the next committed
    // heartbeat stores the lease. Ending orphaned attempts (committed above) stays refused
    // until it can be stored.
    if (!IsStorageFault(status)) return status;
    LOG_EVERY_N(WARNING, 100) << "worker " << worker_id
                              << ": heartbeat renewed in memory only: " << status;
  }
  Publish(work.touched);
  return response;
}

}  // namespace xmod
