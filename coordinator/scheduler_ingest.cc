// See scheduler.h. This file: worker registration, heartbeats (lease renewal, orders,
// progress) and ingest of metric points and checkpoints.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "coordinator/scheduler.h"
#include "coordinator/store_writes.h"
#include "glog/logging.h"

namespace xmod {

absl::StatusOr<xmod::v1::RegisterResponse> Scheduler::Register(
    const xmod::v1::RegisterRequest& request) {
  if (request.worker_name().empty()) {
    return absl::InvalidArgumentError("worker_name: must not be empty");
  }
  std::set<int> indexes;
  for (int i = 0; i < request.slots_size(); ++i) {
    if (!indexes.insert(request.slots(i).index()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("slots[", i, "].index: slot ", request.slots(i).index(), " repeats"));
    }
  }
  const int64_t now = clock_->NowMillis();
  int64_t worker_id = 0;
  // The id comes from the database (stable across re-registrations and restarts).
  absl::Status status = store_->WriteAndWait([&](Db& db) {
    absl::StatusOr<int64_t> id = UpsertWorker(db, request, now);
    if (!id.ok()) return id.status();
    worker_id = *id;
    return InsertEvent(db, now, "worker_registered", 0, 0,
                       absl::StrCat(request.worker_name(), " (", request.hostname(), ") with ",
                                    request.slots_size(), " slots"));
  });
  if (!status.ok()) return status;
  {
    absl::MutexLock lock(&mu_);
    WorkerEntry& worker = workers_[worker_id];
    worker.name = request.worker_name();
    worker.slots.assign(request.slots().begin(), request.slots().end());
    worker.last_seen_ms = now;
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

absl::StatusOr<xmod::v1::HeartbeatResponse> Scheduler::Heartbeat(
    const xmod::v1::HeartbeatRequest& request) {
  const int64_t now = clock_->NowMillis();
  xmod::v1::HeartbeatResponse response;
  std::vector<Store::WriteFn> writes;
  std::vector<Touched> touched;
  std::future<absl::Status> done;
  {
    absl::MutexLock lock(&mu_);
    auto worker = workers_.find(request.worker_id());
    if (worker == workers_.end()) {
      response.set_reregister(true);
      return response;
    }
    worker->second.last_seen_ms = now;
    const int64_t worker_id = request.worker_id();
    writes.push_back([worker_id, now](Db& db) { return TouchWorker(db, worker_id, now); });

    std::set<AttemptKey> listed;
    for (const xmod::v1::RunningAttempt& running : request.running()) {
      const AttemptKey key{running.run_id(), running.attempt()};
      listed.insert(key);
      auto attempt = attempts_.find(key);
      auto run = runs_.find(running.run_id());
      if (attempt == attempts_.end() || attempt->second.worker_id != worker_id ||
          run == runs_.end() || run->second.current_attempt != running.attempt()) {
        // Lost, finished or someone else's: the child must stop.
        xmod::v1::Order* order = response.add_orders();
        order->set_run_id(running.run_id());
        order->set_attempt(running.attempt());
        order->set_action(xmod::v1::STOP);
        continue;
      }
      attempt->second.lease_expires_ms = now + options_.lease_ttl_ms;
      writes.push_back([key, expires = attempt->second.lease_expires_ms](Db& db) {
        return RenewLease(db, key.first, key.second, expires);
      });
      if (run->second.state == xmod::v1::CANCELLED) {
        xmod::v1::Order* order = response.add_orders();
        order->set_run_id(running.run_id());
        order->set_attempt(running.attempt());
        order->set_action(xmod::v1::STOP);
      } else if (running.has_progress()) {
        xmod::v1::Progress progress = running.progress();
        // Losses come from durable metric points (ReportMetrics); a heartbeat's snapshot
        // can predate the last evaluation, so it moves only the position and the rate.
        xmod::v1::Progress position = progress;
        position.clear_train_loss();
        position.clear_val_loss();
        writes.push_back([run_id = running.run_id(), position](Db& db) {
          return UpdateProgress(db, run_id, position);
        });
        touched.push_back({run->second.sweep_id, running.run_id()});
        if (metrics_ != nullptr) {
          metrics_->SetRunProgress(run->second.name, progress.flops(), progress.train_loss());
        }
      }
    }
    // After a re-registration, attempts begun earlier that the worker no longer lists ended
    // with the worker's previous life.
    std::vector<AttemptKey> orphaned;
    for (const auto& [key, attempt] : attempts_) {
      if (attempt.worker_id == worker_id && attempt.worker_epoch < worker->second.epoch &&
          listed.count(key) == 0) {
        orphaned.push_back(key);
      }
    }
    for (const AttemptKey& key : orphaned) {
      EndAttemptLocked(key, "lost", /*failure=*/true, 0, "worker re-registered without it", now,
                       &writes, &touched);
    }
    // Listed attempts now belong to the current registration.
    for (const AttemptKey& key : listed) {
      auto attempt = attempts_.find(key);
      if (attempt != attempts_.end() && attempt->second.worker_id == worker_id) {
        attempt->second.worker_epoch = worker->second.epoch;
      }
    }
    done = Submit(std::move(writes));
  }
  if (absl::Status s = done.get(); !s.ok()) return s;
  Publish(touched);
  return response;
}

absl::StatusOr<xmod::v1::ReportMetricsResponse> Scheduler::ReportMetrics(
    const xmod::v1::ReportMetricsRequest& request) {
  if (request.first_seq() < 0) return absl::InvalidArgumentError("first_seq: must be >= 0");
  const int n = request.points_size();
  const int64_t last_seq = request.first_seq() + n - 1;
  xmod::v1::ReportMetricsResponse response;
  int64_t acked = 0;
  int64_t sweep_id = 0;
  std::string run_name;
  xmod::v1::Progress progress;
  std::future<absl::Status> done;
  {
    absl::MutexLock lock(&mu_);
    const AttemptKey key{request.run_id(), request.attempt()};
    auto attempt = attempts_.find(key);
    auto run = runs_.find(request.run_id());
    if (attempt == attempts_.end() || run == runs_.end() ||
        run->second.current_attempt != request.attempt() ||
        attempt->second.worker_id != request.worker_id()) {
      response.set_stale(true);
      response.set_acked_seq(std::max<int64_t>(last_seq, request.first_seq() - 1));
      return response;
    }
    if (run->second.state == xmod::v1::CANCELLED) response.set_stale(true);
    AttemptEntry& a = attempt->second;
    acked = a.acked_seq;
    if (n > 0 && (a.acked_seq < 0 || request.first_seq() <= a.acked_seq + 1)) {
      acked = std::max(a.acked_seq, last_seq);
    }
    if (n == 0) {
      response.set_acked_seq(a.acked_seq);
      return response;
    }
    // Progress from the batch: position of the furthest point, latest value of each name.
    const xmod::v1::MetricPoint* furthest = &request.points(0);
    for (const xmod::v1::MetricPoint& p : request.points()) {
      if (p.step() >= furthest->step()) furthest = &p;
      if (p.name() == "train/loss") progress.set_train_loss(p.value());
      if (p.name() == "val/loss") progress.set_val_loss(p.value());
      if (p.name() == "perf/tokens_per_second") progress.set_tokens_per_second(p.value());
    }
    progress.set_step(furthest->step());
    progress.set_tokens(furthest->tokens());
    progress.set_flops(furthest->flops());
    sweep_id = run->second.sweep_id;
    run_name = run->second.name;
    std::vector<xmod::v1::MetricPoint> points(request.points().begin(), request.points().end());
    done = store_->Write(
        [key, first = request.first_seq(), points = std::move(points), progress](Db& db) {
          if (absl::Status s = InsertMetrics(db, key.first, key.second, first, points); !s.ok()) {
            return s;
          }
          return UpdateProgress(db, key.first, progress);
        });
  }
  if (absl::Status s = done.get(); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    auto attempt = attempts_.find({request.run_id(), request.attempt()});
    if (attempt != attempts_.end()) {
      attempt->second.acked_seq = std::max(attempt->second.acked_seq, acked);
    }
  }
  if (metrics_ != nullptr) {
    metrics_->AddMetricPoints(n);
    metrics_->SetRunProgress(run_name, progress.flops(), progress.train_loss());
  }
  feed_->Publish(sweep_id, request.run_id());
  response.set_acked_seq(acked);
  return response;
}

absl::Status Scheduler::ReportCheckpoint(const xmod::v1::ReportCheckpointRequest& request) {
  if (request.path().empty()) return absl::InvalidArgumentError("path: must not be empty");
  if (request.step() < 0) return absl::InvalidArgumentError("step: must be >= 0");
  const int64_t now = clock_->NowMillis();
  std::future<absl::Status> done;
  {
    absl::MutexLock lock(&mu_);
    const AttemptKey key{request.run_id(), request.attempt()};
    auto attempt = attempts_.find(key);
    auto run = runs_.find(request.run_id());
    if (attempt == attempts_.end() || run == runs_.end() ||
        run->second.current_attempt != request.attempt() ||
        attempt->second.worker_id != request.worker_id()) {
      return absl::FailedPreconditionError(absl::StrCat("attempt ", request.attempt(), " of run ",
                                                        request.run_id(), " is not current"));
    }
    RunEntry& r = run->second;
    if (!r.latest_checkpoint || request.step() >= r.latest_checkpoint->step) {
      r.latest_checkpoint = Checkpoint{request.step(), request.path(), request.sha256()};
    }
    xmod::v1::Checkpoint c;
    c.set_step(request.step());
    c.set_tokens(request.tokens());
    c.set_flops(request.flops());
    c.set_path(request.path());
    c.set_sha256(request.sha256());
    c.set_bytes(request.bytes());
    done = store_->Write([key, c, now, sweep_id = r.sweep_id](Db& db) {
      if (absl::Status s = InsertCheckpoint(db, key.first, key.second, c, now); !s.ok()) return s;
      return InsertEvent(db, now, "checkpoint", sweep_id, key.first,
                         absl::StrCat("attempt ", key.second, " step ", c.step(), ": ", c.path()));
    });
  }
  return done.get();
}

}  // namespace xmod
