// See scheduler.h. This file: what workers report — registration, heartbeats (lease renewal,
// orders, progress) and checkpoints. Metric points go to MetricIngest (metric_ingest.h).
#include <algorithm>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/confined_path.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/store/event_rows.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/store_writes.h"
#include "glog/logging.h"

namespace xmod {

using scheduling::Member;
using scheduling::PendingChanges;
using scheduling::RunEntry;
using scheduling::WorkerEntry;

namespace {

// INVALID_ARGUMENT naming the field of a registration the scheduler cannot take.
absl::Status CheckRegistration(const xmod::v1::RegisterRequest& request) {
  if (request.worker_name().empty()) {
    return absl::InvalidArgumentError("worker_name: must not be empty");
  }
  if (request.worker_name().find(',') != std::string::npos) {
    // A gang's attempt row lists its members' names comma-separated.
    return absl::InvalidArgumentError("worker_name: must not contain ','");
  }
  std::set<int> indexes;
  for (int i = 0; i < request.slots_size(); ++i) {
    if (!indexes.insert(request.slots(i).index()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("slots[", i, "].index: slot ", request.slots(i).index(), " repeats"));
    }
  }
  const int32_t first = request.rendezvous_port_first();
  const int32_t last = request.rendezvous_port_last();
  if (first < 0 || first > 65535 || (first > 0 && (last < first || last > 65535)) ||
      (first == 0 && last != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous_port_first, rendezvous_port_last: ", first, "..", last,
                     " is not a port range within 1..65535 (or 0..0 for none)"));
  }
  return absl::OkStatus();
}

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
  if (absl::Status s = CheckRegistration(request); !s.ok()) return s;
  const int32_t first = request.rendezvous_port_first();
  const int32_t last = request.rendezvous_port_last();
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
    return InsertEvent(db, now, "worker_registered", 0, 0,
                       absl::StrCat(request.worker_name(), " (", request.hostname(), ") with ",
                                    request.slots_size(), " slots"));
  });
  if (!status.ok()) return status;
  {
    absl::MutexLock lock(&mu_);
    WorkerEntry& worker = live_.workers[worker_id];
    worker.name = request.worker_name();
    worker.slots.assign(request.slots().begin(), request.slots().end());
    worker.last_seen_ms = clock_->MonotonicMillis();
    worker.host = registration.advertise_host();
    if (worker.port_first != first || worker.port_last != last) worker.next_port = 0;
    worker.port_first = first;
    worker.port_last = last;
    worker.free_slots.clear();  // known again from its next AcquireRun
    // Attempts begun before this registration are lost unless the next heartbeat lists them.
    worker.epoch += 1;
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
  const int64_t epoch = live_.workers.at(worker_id).epoch;
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
  // Renewals take effect once stored. An attempt that ended meanwhile stays ended.
  auto worker = live_.workers.find(worker_id);
  if (worker != live_.workers.end()) {
    worker->second.last_seen_ms = std::max(worker->second.last_seen_ms, mono);
    for (const AttemptKey& key : work.renewed) {
      auto attempt = live_.attempts.find(key);
      Member* member = attempt == live_.attempts.end()
                           ? nullptr
                           : scheduling::MemberOn(attempt->second, worker_id);
      if (member == nullptr) continue;
      member->lease_expires_ms = std::max(member->lease_expires_ms, mono + options_.lease_ttl_ms);
      // Listed attempts now belong to the current registration.
      member->worker_epoch = worker->second.epoch;
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
    if (live_.workers.count(worker_id) == 0) {
      response.set_reregister(true);
      return response;
    }
    work.writes.push_back([worker_id, now](Db& db) { return TouchWorker(db, worker_id, now); });
    // Renewals are kept in memory after the commit: lease_ttl_ms from later than the arrival.
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
    } else {
      done = Submit(std::move(work.writes));
    }
  }
  if (!committed) status = done.get();
  if (!status.ok()) {
    // A database that cannot be written (a full or failing volume) fails the worker's
    // heartbeat row and renewals, not its running attempts: the leases are renewed in memory
    // (a restarted coordinator gives every open attempt a TTL of grace anyway), their metric
    // points wait in the worker's spill, and the next committed heartbeat stores the lease.
    // Ending orphaned attempts (committed above) stays refused until it can be stored.
    if (committed || !IsStorageFault(status)) return status;
    LOG_EVERY_N(WARNING, 100) << "worker " << worker_id
                              << ": heartbeat renewed in memory only: " << status;
  }
  {
    absl::MutexLock lock(&mu_);
    ApplyHeartbeatLocked(worker_id, mono, work);
  }
  Publish(work.touched);
  return response;
}

absl::Status Scheduler::CheckCurrentLocked(const xmod::v1::ReportCheckpointRequest& request) const {
  auto attempt = live_.attempts.find(AttemptKey{request.run_id(), request.attempt()});
  auto run = live_.runs.find(request.run_id());
  if (attempt == live_.attempts.end() || run == live_.runs.end() ||
      run->second.current_attempt != request.attempt() ||
      attempt->second.members.front().worker_id != request.worker_id()) {
    return absl::FailedPreconditionError(absl::StrCat("attempt ", request.attempt(), " of run ",
                                                      request.run_id(), " is not current"));
  }
  return absl::OkStatus();
}

absl::Status Scheduler::CheckReportedPath(const xmod::v1::ReportCheckpointRequest& request) {
  int64_t sweep_id = 0;
  {
    // A stale attempt hears that it is stale (and its worker stops it), not that its path is
    // wrong, which a worker takes as a refusal of that one report.
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckCurrentLocked(request); !s.ok()) return s;
    sweep_id = live_.runs.at(request.run_id()).sweep_id;
  }
  // The file-system checks run outside the lock: the folder may be on network storage.
  const std::string dir = CheckpointDir(sweep_id, request.run_id());
  absl::Status status = CheckPathUnder("path", request.path(), dir);
  if (status.ok()) status = CheckFileUnder("path", request.path(), dir, request.bytes());
  return status;
}

std::future<absl::Status> Scheduler::RejectCheckpointLocked(
    const xmod::v1::ReportCheckpointRequest& request, int64_t now,
    std::shared_ptr<std::vector<xmod::v1::Checkpoint>> remaining) {
  // The trainer refused a resume candidate and goes on to the next one offered: the
  // newest recorded checkpoint older than it, or a fresh start when none is left.
  const AttemptKey key{request.run_id(), request.attempt()};
  const RunEntry& r = live_.runs.at(request.run_id());
  int64_t next = 0;
  for (const std::optional<scheduling::ResumeCheckpoint>* c :
       {&r.latest_checkpoint, &r.previous_checkpoint}) {
    if (c->has_value() && (*c)->path != request.path() && (*c)->step < request.step()) {
      next = std::max(next, (*c)->step);
    }
  }
  const std::string note =
      absl::StrCat("checkpoint at step ", request.step(), " (", request.path(),
                   ") refused at resume: ", request.rejected(), "; ",
                   next > 0 ? absl::StrCat("resumed from step ", next)
                            : std::string("no older checkpoint, started from scratch"));
  LOG(WARNING) << "run " << key.first << " attempt " << key.second << ": " << note;
  return store_->Write(
      [key, path = request.path(), next, note, now, sweep_id = r.sweep_id, remaining](Db& db) {
        if (absl::Status s = DeleteCheckpoint(db, key.first, path); !s.ok()) return s;
        if (absl::Status s = NoteResumeFallback(db, key.first, key.second, next, note); !s.ok()) {
          return s;
        }
        absl::StatusOr<std::vector<xmod::v1::Checkpoint>> left = LoadCheckpoints(db, key.first);
        if (!left.ok()) return left.status();
        *remaining = *std::move(left);
        return InsertEvent(db, now, "checkpoint_rejected", sweep_id, key.first,
                           absl::StrCat("attempt ", key.second, ": ", note));
      });
}

std::future<absl::Status> Scheduler::RecordCheckpointLocked(
    const xmod::v1::ReportCheckpointRequest& request, int64_t now) {
  const AttemptKey key{request.run_id(), request.attempt()};
  xmod::v1::Checkpoint c;
  c.set_step(request.step());
  c.set_tokens(request.tokens());
  c.set_flops(request.flops());
  c.set_path(request.path());
  c.set_sha256(request.sha256());
  c.set_bytes(request.bytes());
  return store_->Write([key, c, now, sweep_id = live_.runs.at(key.first).sweep_id](Db& db) {
    if (absl::Status s = InsertCheckpoint(db, key.first, key.second, c, now); !s.ok()) return s;
    // The worker deletes the files of older ones once this report is acknowledged.
    if (absl::Status s = KeepNewestCheckpoints(db, key.first, 2); !s.ok()) return s;
    return InsertEvent(db, now, "checkpoint", sweep_id, key.first,
                       absl::StrCat("attempt ", key.second, " step ", c.step(), ": ", c.path()));
  });
}

absl::Status Scheduler::ReportCheckpoint(const xmod::v1::ReportCheckpointRequest& request) {
  if (request.path().empty()) return absl::InvalidArgumentError("path: must not be empty");
  if (request.step() < 0) return absl::InvalidArgumentError("step: must be >= 0");
  const bool rejected = !request.rejected().empty();
  if (!rejected) {
    if (absl::Status s = CheckReportedPath(request); !s.ok()) return s;
  }
  const int64_t now = clock_->NowMillis();
  std::future<absl::Status> done;
  // After a refusal: the run's recorded checkpoints left, by step (read in the transaction).
  auto remaining = std::make_shared<std::vector<xmod::v1::Checkpoint>>();
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckCurrentLocked(request); !s.ok()) return s;
    done = rejected ? RejectCheckpointLocked(request, now, remaining)
                    : RecordCheckpointLocked(request, now);
  }
  if (absl::Status s = done.get(); !s.ok()) return s;
  // The resume point and its fallback move once the database holds the change.
  absl::MutexLock lock(&mu_);
  auto run = live_.runs.find(request.run_id());
  if (run == live_.runs.end()) return absl::OkStatus();
  if (rejected) {
    // The next retry's candidates: the two newest checkpoints still recorded.
    scheduling::ResetCheckpoints(run->second, *remaining);
  } else {
    scheduling::NoteCheckpoint(run->second,
                               {request.step(), request.path(), request.sha256(), request.bytes()});
    auto attempt = live_.attempts.find({request.run_id(), request.attempt()});
    if (attempt != live_.attempts.end()) {
      attempt->second.checkpointed_ms = clock_->MonotonicMillis();
    }
  }
  return absl::OkStatus();
}

}  // namespace xmod
