// See scheduler.h. This file: rebuild, the queue, user actions, Acquire, FinishRun and lease
// expiry. Worker registration, heartbeats and ingest are in scheduler_ingest.cc.
#include "coordinator/scheduling/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "coordinator/store/design_store.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/store_writes.h"
#include "glog/logging.h"
#include "trainer_contract/exit_codes.h"

namespace xmod {

using xmod::v1::RunState;

namespace {

// Stores expanded `runs` in sweep `sweep_id` and fills in their ids.
absl::Status InsertRuns(Db& db, int64_t sweep_id, std::vector<xmod::v1::Run>* runs, int64_t now) {
  for (xmod::v1::Run& run : *runs) {
    absl::StatusOr<int64_t> run_id = InsertRun(db, sweep_id, run, now);
    if (!run_id.ok()) return run_id.status();
    run.set_id(*run_id);
    run.set_sweep_id(sweep_id);
    run.set_created_unix_ms(now);
  }
  return absl::OkStatus();
}

// Workers a run spans: ranks / ranks_per_worker for a gang, else 1.
int MembersNeeded(const xmod::v1::RunSpec& spec) {
  const int ranks = std::max(1, spec.training().ranks());
  const int per = spec.training().ranks_per_worker();
  return per > 0 && per < ranks ? ranks / per : 1;
}

// Slots a run occupies on each of its workers: ranks_per_worker for a gang, else every rank
// (training.ranks, 0 = 1).
int SlotsPerMember(const xmod::v1::RunSpec& spec) {
  const int ranks = std::max(1, spec.training().ranks());
  return MembersNeeded(spec) > 1 ? spec.training().ranks_per_worker() : ranks;
}

// The TCPStore address of a gang whose member 0 advertises `host`.
std::string RendezvousAddress(const std::string& host, int32_t port) {
  return absl::StrCat("tcp://", host, ":", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(Store* store, Clock* clock,
                                                             ChangeFeed* feed,
                                                             CoordinatorMetrics* metrics,
                                                             const SchedulerOptions& options) {
  std::unique_ptr<Scheduler> scheduler(new Scheduler(store, clock, feed, metrics, options));
  if (absl::Status s = scheduler->Rebuild(); !s.ok()) return s;
  return scheduler;
}

Scheduler::Scheduler(Store* store, Clock* clock, ChangeFeed* feed, CoordinatorMetrics* metrics,
                     const SchedulerOptions& options)
    : store_(store), clock_(clock), feed_(feed), metrics_(metrics), options_(options) {}

int64_t Scheduler::BackoffMillis(int failures) const {
  int64_t backoff = options_.backoff_base_ms;
  for (int i = 1; i < failures && backoff < options_.backoff_max_ms; ++i) backoff *= 2;
  return std::min(backoff, options_.backoff_max_ms);
}

std::future<absl::Status> Scheduler::Submit(std::vector<Store::WriteFn> writes) {
  return store_->Write([writes = std::move(writes)](Db& db) {
    for (const Store::WriteFn& write : writes) {
      if (absl::Status s = write(db); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
}

void Scheduler::Publish(const std::vector<Touched>& touched) {
  for (const Touched& t : touched) feed_->Publish(t.sweep_id, t.run_id);
}

void Scheduler::SaveLocked(Change& change, int64_t run_id) {
  if (change.runs.count(run_id) > 0) return;
  auto it = runs_.find(run_id);
  change.runs[run_id] = it == runs_.end() ? std::nullopt : std::optional<RunEntry>(it->second);
}

void Scheduler::SaveLocked(Change& change, const AttemptKey& key) {
  if (change.attempts.count(key) > 0) return;
  auto it = attempts_.find(key);
  change.attempts[key] =
      it == attempts_.end() ? std::nullopt : std::optional<AttemptEntry>(it->second);
}

absl::Status Scheduler::CommitLocked(std::vector<Store::WriteFn> writes, const Change& change) {
  absl::Status status = writes.empty() ? absl::OkStatus() : Submit(std::move(writes)).get();
  if (status.ok()) {
    if (metrics_ != nullptr) {
      for (const std::string& name : change.ended_runs) metrics_->RunEnded(name);
    }
    return status;
  }
  // Put memory back as the database still has it. A run is in queue_ exactly when it is in
  // runs_ in state QUEUED, and its queue key never changes.
  for (const auto& [run_id, saved] : change.runs) {
    auto it = runs_.find(run_id);
    if (it != runs_.end()) {
      queue_.erase({-it->second.priority, it->second.sweep_id, run_id});
      runs_.erase(it);
    }
    if (saved) {
      runs_[run_id] = *saved;
      if (saved->state == xmod::v1::QUEUED) {
        queue_.insert({-saved->priority, saved->sweep_id, run_id});
        queue_changed_.SignalAll();
      }
    }
  }
  for (const auto& [key, saved] : change.attempts) {
    if (saved) {
      attempts_[key] = *saved;
    } else {
      attempts_.erase(key);
    }
  }
  LOG(WARNING) << "scheduler: a commit failed, memory left as stored: " << status;
  return status;
}

absl::Status Scheduler::Rebuild() {
  SchedulerSnapshot snap;
  std::map<int64_t, xmod::v1::Checkpoint> previous;  // by run: the fallback of its latest
  absl::Status read = store_->Read([&snap, &previous](Db& db) {
    absl::StatusOr<SchedulerSnapshot> s = LoadSchedulerSnapshot(db);
    if (!s.ok()) return s.status();
    snap = *std::move(s);
    for (const RunQueueEntry& e : snap.runs) {
      absl::StatusOr<std::vector<xmod::v1::Checkpoint>> all = LoadCheckpoints(db, e.run_id);
      if (!all.ok()) return all.status();
      // Ordered by step: the one before the last is the fallback.
      if (all->size() >= 2) previous[e.run_id] = (*all)[all->size() - 2];
    }
    return absl::OkStatus();
  });
  if (!read.ok()) return read;

  // The database holds wall-clock times; memory keeps monotonic ones.
  const int64_t now = clock_->NowMillis();
  const int64_t mono = clock_->MonotonicMillis();
  std::vector<Store::WriteFn> writes;
  {
    absl::MutexLock lock(&mu_);
    for (const WorkerRow& w : snap.workers) {
      WorkerEntry& worker = workers_[w.id];
      worker.name = w.name;
      worker.slots = w.slots;
      worker.last_seen_ms = mono - std::max<int64_t>(0, now - w.last_seen_ms);
      worker.host = w.advertise_host;
      worker.port_first = w.rendezvous_port_first;
      worker.port_last = w.rendezvous_port_last;
    }
    for (const RunQueueEntry& e : snap.runs) {
      RunEntry& run = runs_[e.run_id];
      run.sweep_id = e.sweep_id;
      run.priority = e.priority;
      run.state = e.state;
      run.attempts = e.attempts;
      run.failures = e.failures;
      run.max_attempts = e.max_attempts;
      run.not_before_ms = mono + std::max<int64_t>(0, e.not_before_ms - now);
      run.name = e.name;
      run.spec = e.spec;
      if (e.latest_checkpoint) {
        run.latest_checkpoint = CheckpointOf(*e.latest_checkpoint);
      }
      if (auto p = previous.find(e.run_id); p != previous.end()) {
        run.previous_checkpoint = CheckpointOf(p->second);
      }
    }
    std::map<std::string, int64_t> worker_ids;  // by name
    for (const auto& [id, w] : workers_) worker_ids[w.name] = id;
    for (const OpenAttempt& a : snap.open_attempts) {
      auto run = runs_.find(a.run_id);
      AttemptEntry entry;
      entry.acked_seq = a.max_seq;
      entry.rendezvous = a.rendezvous;
      // One member per name; a gang's row lists them in member order (member 0 = worker_id).
      const std::vector<std::string> names = absl::StrSplit(a.worker, ',');
      const std::vector<std::string> slots = absl::StrSplit(a.slots, ';');
      for (size_t i = 0; i < names.size(); ++i) {
        Member member;
        auto id = worker_ids.find(names[i]);
        member.worker_id = i == 0 ? a.worker_id : (id == worker_ids.end() ? 0 : id->second);
        member.worker = names[i];
        // Keep the lease, with one TTL of grace from the restart for workers to reattach.
        member.lease_expires_ms = mono + std::max(a.lease_expires_ms - now, options_.lease_ttl_ms);
        for (absl::string_view slot :
             absl::StrSplit(i < slots.size() ? slots[i] : "", ',', absl::SkipEmpty())) {
          int32_t index = 0;
          if (absl::SimpleAtoi(slot, &index)) member.slots.push_back(index);
        }
        entry.members.push_back(std::move(member));
      }
      attempts_[{a.run_id, a.attempt}] = entry;
      if (run != runs_.end() && a.attempt == run->second.attempts) {
        run->second.current_attempt = a.attempt;
      }
    }
    for (auto& [run_id, run] : runs_) {
      if (run.state == xmod::v1::QUEUED) {
        queue_.insert({-run.priority, run.sweep_id, run_id});
      } else if (run.state == xmod::v1::RUNNING && run.current_attempt == 0) {
        // RUNNING without an open attempt cannot come from a committed transaction of this
        // code; requeue rather than strand the run.
        run.state = xmod::v1::QUEUED;
        queue_.insert({-run.priority, run.sweep_id, run_id});
        writes.push_back([id = run_id](Db& db) {
          RunUpdate u;
          u.run_id = id;
          u.state = xmod::v1::QUEUED;
          return UpdateRun(db, u);
        });
      }
    }
    if (metrics_ != nullptr) {
      // The counts since the database was created, not since this process started.
      metrics_->AddLeasesExpired(snap.counters[kLeasesLostCounter]);
      metrics_->AddOomExits(snap.counters[kOomExitsCounter]);
    }
    LOG(INFO) << "scheduler: rebuilt " << runs_.size() << " live runs, " << queue_.size()
              << " queued, " << attempts_.size() << " open attempts, " << workers_.size()
              << " workers";
  }
  if (writes.empty()) return absl::OkStatus();
  return Submit(std::move(writes)).get();
}

void Scheduler::EnqueueLocked(int64_t run_id, RunEntry& run) {
  run.state = xmod::v1::QUEUED;
  queue_.insert({-run.priority, run.sweep_id, run_id});
  queue_changed_.SignalAll();
}

absl::StatusOr<int64_t> Scheduler::SubmitSweep(const xmod::v1::SweepSpec& spec,
                                               std::vector<xmod::v1::Run>* runs) {
  const int64_t now = clock_->NowMillis();
  int64_t sweep_id = 0;
  absl::Status status = store_->WriteAndWait([&](Db& db) {
    absl::StatusOr<int64_t> id = InsertSweep(db, spec, now);
    if (!id.ok()) return id.status();
    sweep_id = *id;
    if (absl::Status s = InsertRuns(db, sweep_id, runs, now); !s.ok()) return s;
    return InsertEvent(db, now, "sweep_submitted", sweep_id, 0,
                       absl::StrCat(spec.name(), ": ", runs->size(), " runs"));
  });
  if (!status.ok()) return status;
  QueueStored(sweep_id, *runs);
  return sweep_id;
}

absl::Status Scheduler::AddRuns(int64_t sweep_id, std::vector<xmod::v1::Run>* runs,
                                Store::WriteFn also) {
  const int64_t now = clock_->NowMillis();
  absl::Status status = store_->WriteAndWait([&](Db& db) {
    absl::StatusOr<Stmt> sweep = db.Prepare("SELECT cancelled FROM sweeps WHERE id = ?");
    if (!sweep.ok()) return sweep.status();
    absl::StatusOr<bool> row = sweep->Bind(1, sweep_id).Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::NotFoundError(absl::StrCat("sweep ", sweep_id, " does not exist"));
    if (sweep->Int(0) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("sweep ", sweep_id, " was cancelled"));
    }
    if (absl::Status s = InsertRuns(db, sweep_id, runs, now); !s.ok()) return s;
    if (absl::Status s = also(db); !s.ok()) return s;
    return InsertEvent(db, now, "runs_added", sweep_id, 0, absl::StrCat(runs->size(), " runs"));
  });
  if (!status.ok()) return status;
  QueueStored(sweep_id, *runs);
  return absl::OkStatus();
}

void Scheduler::QueueStored(int64_t sweep_id, const std::vector<xmod::v1::Run>& runs) {
  {
    absl::MutexLock lock(&mu_);
    for (const xmod::v1::Run& r : runs) {
      RunEntry& run = runs_[r.id()];
      run.sweep_id = sweep_id;
      run.priority = r.priority();
      run.max_attempts = r.max_attempts();
      run.name = r.name();
      run.spec = r.spec();
      EnqueueLocked(r.id(), run);
    }
  }
  for (const xmod::v1::Run& r : runs) feed_->Publish(sweep_id, r.id());
}

absl::Status Scheduler::CancelRun(int64_t run_id) { return EndRunByUser(run_id, std::nullopt); }

absl::Status Scheduler::StopEarly(int64_t run_id, double flops, double live_delta,
                                  const std::string& reason) {
  return EndRunByUser(run_id, Censoring{flops, live_delta, reason});
}

absl::Status Scheduler::EndRunByUser(int64_t run_id, std::optional<Censoring> censoring) {
  absl::StatusOr<xmod::v1::Run> stored = absl::NotFoundError("");
  if (absl::Status s = store_->Read([&](Db& db) {
        stored = LoadRun(db, run_id);
        return stored.status();
      });
      !s.ok()) {
    return s;
  }
  const int64_t now = clock_->NowMillis();
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    auto it = runs_.find(run_id);
    if (it == runs_.end() || it->second.state == xmod::v1::CANCELLED) {
      if (stored->state() == xmod::v1::CANCELLED) return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrCat("run ", run_id, " already ended ",
                                                        xmod::v1::RunState_Name(stored->state())));
    }
    Change change;
    SaveLocked(change, run_id);
    RunEntry& run = it->second;
    queue_.erase({-run.priority, run.sweep_id, run_id});
    run.state = xmod::v1::CANCELLED;
    change.ended_runs.push_back(run.name);
    const int64_t sweep_id = run.sweep_id;
    if (run.current_attempt == 0) runs_.erase(it);  // else kept until its attempt ends
    std::vector<Store::WriteFn> writes;
    writes.push_back([run_id, sweep_id, now, censoring](Db& db) {
      RunUpdate u;
      u.run_id = run_id;
      u.state = xmod::v1::CANCELLED;
      u.finished_ms = now;
      if (censoring) u.error = censoring->reason;
      if (absl::Status s = UpdateRun(db, u); !s.ok()) return s;
      if (!censoring) return InsertEvent(db, now, "run_cancelled", sweep_id, run_id, "");
      if (absl::Status s = InsertCensoredRun(db, run_id, censoring->flops, censoring->live_delta,
                                             censoring->reason, now);
          !s.ok()) {
        return s;
      }
      return InsertEvent(db, now, "run_stopped_early", sweep_id, run_id, censoring->reason);
    });
    status = CommitLocked(std::move(writes), change);
  }
  if (status.ok()) feed_->Publish(stored->sweep_id(), run_id);
  return status;
}

absl::Status Scheduler::CancelSweep(int64_t sweep_id) {
  const int64_t now = clock_->NowMillis();
  std::vector<Store::WriteFn> writes;
  std::vector<Touched> touched;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    Change change;
    for (auto it = runs_.begin(); it != runs_.end();) {
      RunEntry& run = it->second;
      const int64_t run_id = it->first;
      if (run.sweep_id != sweep_id || run.state == xmod::v1::CANCELLED) {
        ++it;
        continue;
      }
      SaveLocked(change, run_id);
      queue_.erase({-run.priority, run.sweep_id, run_id});
      run.state = xmod::v1::CANCELLED;
      change.ended_runs.push_back(run.name);
      touched.push_back({sweep_id, run_id});
      writes.push_back([run_id, now](Db& db) {
        RunUpdate u;
        u.run_id = run_id;
        u.state = xmod::v1::CANCELLED;
        u.finished_ms = now;
        return UpdateRun(db, u);
      });
      it = run.current_attempt == 0 ? runs_.erase(it) : std::next(it);
    }
    writes.push_back([sweep_id, now, n = touched.size()](Db& db) {
      if (absl::Status s = MarkSweepCancelled(db, sweep_id); !s.ok()) return s;
      return InsertEvent(db, now, "sweep_cancelled", sweep_id, 0,
                         absl::StrCat(n, " runs cancelled"));
    });
    status = CommitLocked(std::move(writes), change);
  }
  if (!status.ok()) return status;
  Publish(touched);
  feed_->Publish(sweep_id, 0);
  return status;
}

absl::Status Scheduler::Requeue(const xmod::v1::Run& stored, std::optional<Checkpoint> checkpoint) {
  const int64_t run_id = stored.id();
  if (stored.state() != xmod::v1::FAILED && stored.state() != xmod::v1::CANCELLED) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run_id, " is ", xmod::v1::RunState_Name(stored.state()),
                     "; only FAILED or CANCELLED runs can be resumed"));
  }
  const int64_t now = clock_->NowMillis();
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (runs_.count(run_id) > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "run ", run_id, " is still stopping its last attempt; resume it once that ended"));
    }
    Change change;
    SaveLocked(change, run_id);
    RunEntry& run = runs_[run_id];
    run.sweep_id = stored.sweep_id();
    run.priority = stored.priority();
    run.attempts = stored.attempts();
    run.failures = 0;
    run.oom_failures = 0;
    run.lost = 0;
    run.max_attempts = stored.max_attempts();
    run.not_before_ms = 0;
    run.name = stored.name();
    run.spec = stored.spec();
    run.latest_checkpoint = std::move(checkpoint);
    EnqueueLocked(run_id, run);
    std::vector<Store::WriteFn> writes;
    writes.push_back([run_id, sweep_id = stored.sweep_id(), now](Db& db) {
      RunUpdate u;
      u.run_id = run_id;
      u.state = xmod::v1::QUEUED;
      u.failures = 0;
      u.not_before_ms = 0;
      u.error = "";
      u.finished_ms = 0;
      if (absl::Status s = UpdateRun(db, u); !s.ok()) return s;
      return InsertEvent(db, now, "run_resumed", sweep_id, run_id, "");
    });
    status = CommitLocked(std::move(writes), change);
  }
  if (status.ok()) feed_->Publish(stored.sweep_id(), run_id);
  return status;
}

absl::Status Scheduler::ResumeRun(int64_t run_id) {
  xmod::v1::Run stored;
  std::optional<xmod::v1::Checkpoint> checkpoint;
  if (absl::Status s = store_->Read([&](Db& db) {
        absl::StatusOr<xmod::v1::Run> run = LoadRun(db, run_id);
        if (!run.ok()) return run.status();
        stored = *std::move(run);
        absl::StatusOr<std::optional<xmod::v1::Checkpoint>> c = LatestCheckpoint(db, run_id);
        if (!c.ok()) return c.status();
        checkpoint = *c;
        return absl::OkStatus();
      });
      !s.ok()) {
    return s;
  }
  std::optional<Checkpoint> resume;
  if (checkpoint) resume = CheckpointOf(*checkpoint);
  return Requeue(stored, resume);
}

absl::StatusOr<std::vector<int64_t>> Scheduler::RetryFailed(int64_t sweep_id) {
  std::vector<xmod::v1::Run> failed;
  if (absl::Status s = store_->Read([&](Db& db) {
        if (absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, sweep_id); !sweep.ok()) {
          return sweep.status();
        }
        RunFilter filter;
        filter.sweep_id = sweep_id;
        filter.states = {xmod::v1::FAILED};
        absl::StatusOr<std::vector<xmod::v1::Run>> runs = LoadRuns(db, filter);
        if (!runs.ok()) return runs.status();
        failed = *std::move(runs);
        return absl::OkStatus();
      });
      !s.ok()) {
    return s;
  }
  std::vector<int64_t> ids;
  for (const xmod::v1::Run& run : failed) {
    absl::Status s = ResumeRun(run.id());
    if (s.ok()) {
      ids.push_back(run.id());
    } else if (!absl::IsFailedPrecondition(s)) {
      return s;
    }
  }
  return ids;
}

Scheduler::Member* Scheduler::MemberOn(AttemptEntry& attempt, int64_t worker_id) {
  for (Member& member : attempt.members) {
    if (member.worker_id == worker_id) return &member;
  }
  return nullptr;
}

std::set<std::string> Scheduler::HeldRendezvousLocked() const {
  std::set<std::string> held;
  for (const auto& [key, open] : attempts_) {
    if (!open.rendezvous.empty()) {
      held.insert(open.rendezvous);
    } else if (open.members.size() > 1) {
      // A gang recorded before its address was (schema version < 5): any port of its
      // member 0's range may be its store, so all of them are held until it ends.
      auto host = workers_.find(open.members.front().worker_id);
      if (host == workers_.end() || host->second.port_first <= 0) continue;
      for (int32_t port = host->second.port_first; port <= host->second.port_last; ++port) {
        held.insert(RendezvousAddress(host->second.host, port));
      }
    }
  }
  return held;
}

std::optional<int32_t> Scheduler::FreePort(const WorkerEntry& worker,
                                           const std::set<std::string>& held) {
  if (worker.port_first <= 0) return std::nullopt;
  // Ends within held.size() + 1 tries unless the range is exhausted (span <= held.size()).
  const int32_t span = worker.port_last - worker.port_first + 1;
  for (int32_t i = 0; i < span; ++i) {
    const int32_t port = worker.port_first + (worker.next_port + i) % span;
    if (held.count(RendezvousAddress(worker.host, port)) == 0) return port;
  }
  return std::nullopt;
}

std::string Scheduler::NoPortReasonLocked(const std::vector<int64_t>& ready) const {
  std::vector<std::string> ranges;
  for (int64_t id : ready) {
    const WorkerEntry& w = workers_.at(id);
    if (w.port_first > 0) {
      ranges.push_back(
          absl::StrCat(w.name, " (", w.host, ":", w.port_first, "-", w.port_last, ")"));
    }
  }
  if (ranges.empty()) {
    return "waiting for a rendezvous port: no ready worker declares any (xmod-worker "
           "--rendezvous_ports)";
  }
  return absl::StrCat("waiting for a rendezvous port: every port of ", absl::StrJoin(ranges, ", "),
                      " is held by an open gang");
}

std::string Scheduler::PendingReason(int64_t run_id) {
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.state != xmod::v1::QUEUED) return "";
  return it->second.pending_reason;
}

bool Scheduler::AvailableLocked(const WorkerEntry& worker, int64_t mono) const {
  return mono - worker.last_seen_ms <= options_.lease_ttl_ms &&
         (worker.polling > 0 || mono - worker.poll_ended_ms <= options_.heartbeat_interval_ms);
}

std::optional<Scheduler::Placement> Scheduler::PlanLocked(int64_t poller, int64_t mono,
                                                          int64_t* next_ready) {
  const WorkerEntry& me = workers_.at(poller);
  auto first = [](const std::vector<int32_t>& slots, int n) {
    return std::vector<int32_t>(slots.begin(), slots.begin() + n);
  };
  std::set<int64_t> reserved;                 // workers held for a run ahead in the queue
  std::optional<std::set<std::string>> held;  // rendezvous addresses, once a gang needs them
  for (const QueueKey& key : queue_) {
    const int64_t run_id = std::get<2>(key);
    RunEntry& run = runs_.at(run_id);
    if (run.not_before_ms > mono) {
      *next_ready = *next_ready < 0 ? run.not_before_ms : std::min(*next_ready, run.not_before_ms);
      continue;
    }
    const int members = MembersNeeded(run.spec);
    const int per = SlotsPerMember(run.spec);
    const int my_free = static_cast<int>(me.free_slots.size());
    if (members == 1) {
      // On the poller only. A run that fits its size but not its free slots now reserves it:
      // nothing behind it is leased here, so its slots drain. A run bigger than the worker
      // waits for a bigger one.
      if (reserved.count(poller) > 0) return std::nullopt;
      if (per <= my_free) return Placement{run_id, {{poller, first(me.free_slots, per)}}};
      if (per <= std::max(my_free, static_cast<int>(me.slots.size()))) return std::nullopt;
      continue;
    }
    // A gang: `members` distinct workers not reserved ahead, each with `per` free slots.
    std::vector<int64_t> ready;  // polling, with the slots free now
    std::vector<int64_t> able;   // live, with that many slots at all
    for (const auto& [id, worker] : workers_) {
      if (reserved.count(id) > 0 || static_cast<int>(worker.slots.size()) < per ||
          mono - worker.last_seen_ms > options_.lease_ttl_ms) {
        continue;
      }
      able.push_back(id);
      if (AvailableLocked(worker, mono) && static_cast<int>(worker.free_slots.size()) >= per) {
        ready.push_back(id);
      }
    }
    // Member 0 serves the store, so it needs a free rendezvous port; the poller first if it
    // can.
    run.pending_reason.clear();
    if (static_cast<int>(ready.size()) >= members) {
      std::stable_partition(ready.begin(), ready.end(), [&](int64_t id) { return id == poller; });
      if (!held) held = HeldRendezvousLocked();
      std::optional<int32_t> port;
      auto host = std::find_if(ready.begin(), ready.end(), [&](int64_t id) {
        return (port = FreePort(workers_.at(id), *held)).has_value();
      });
      if (host != ready.end()) {
        std::rotate(ready.begin(), host, host + 1);
        Placement placement{run_id, {}, *port};
        for (int m = 0; m < members; ++m) {
          placement.members.emplace_back(ready[m], first(workers_.at(ready[m]).free_slots, per));
        }
        return placement;
      }
      run.pending_reason = NoPortReasonLocked(ready);
    }
    if (static_cast<int>(able.size()) < members) continue;  // waits for the cluster to grow
    // Reserve the workers closest to fitting; they only gain free slots until it starts.
    auto room = [&](int64_t id) {
      return std::min(per, static_cast<int>(workers_.at(id).free_slots.size()));
    };
    std::stable_sort(able.begin(), able.end(),
                     [&](int64_t a, int64_t b) { return room(a) > room(b); });
    reserved.insert(able.begin(), able.begin() + members);
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<xmod::v1::Assignment>> Scheduler::LeaseLocked(const Placement& placement,
                                                                         int64_t arrived,
                                                                         int64_t* sweep_id) {
  // Memory changes are kept only once the database holds them.
  const int64_t now = clock_->NowMillis();
  const int64_t mono = clock_->MonotonicMillis();
  const int64_t run_id = placement.run_id;
  const bool gang = placement.members.size() > 1;
  Change change;
  SaveLocked(change, run_id);
  RunEntry& run = runs_.at(run_id);
  SaveLocked(change, AttemptKey{run_id, run.attempts + 1});
  queue_.erase({-run.priority, run.sweep_id, run_id});
  run.state = xmod::v1::RUNNING;
  run.attempts += 1;
  run.current_attempt = run.attempts;
  *sweep_id = run.sweep_id;

  xmod::v1::Assignment base;
  base.set_run_id(run_id);
  base.set_attempt(run.attempts);
  *base.mutable_spec() = run.spec;
  base.mutable_spec()->set_run_id(run_id);
  base.mutable_spec()->set_attempt(run.attempts);
  base.mutable_spec()->set_checkpoint_dir(CheckpointDir(run.sweep_id, run_id));
  int64_t resumed_from = 0;
  if (run.latest_checkpoint) {
    resumed_from = run.latest_checkpoint->step;
    *base.mutable_resume() = ResumePointOf(*run.latest_checkpoint);
    if (run.previous_checkpoint) *base.add_fallbacks() = ResumePointOf(*run.previous_checkpoint);
  }
  std::string rendezvous;
  if (gang) {
    // The planned free port; the next gang on this host tries the one after it first.
    WorkerEntry& host = workers_.at(placement.members[0].first);
    rendezvous = RendezvousAddress(host.host, placement.port);
    host.next_port =
        (placement.port - host.port_first + 1) % (host.port_last - host.port_first + 1);
  }

  AttemptEntry attempt;
  std::vector<xmod::v1::Assignment> parts;
  std::vector<std::string> names;
  std::vector<std::string> slot_lists;
  const int world = std::max(1, run.spec.training().ranks());
  for (size_t m = 0; m < placement.members.size(); ++m) {
    const auto& [worker_id, slots] = placement.members[m];
    WorkerEntry& worker = workers_.at(worker_id);
    Member member;
    member.worker_id = worker_id;
    member.worker = worker.name;
    member.worker_epoch = worker.epoch;
    member.slots = slots;
    member.delivered = !gang;  // a gang's members take their parts when they poll
    member.lease_expires_ms =
        mono + (gang ? options_.gang_start_timeout_ms : options_.lease_ttl_ms);
    attempt.members.push_back(member);
    for (int32_t slot : slots) {
      worker.free_slots.erase(std::remove(worker.free_slots.begin(), worker.free_slots.end(), slot),
                              worker.free_slots.end());
    }
    xmod::v1::Assignment part = base;
    for (int32_t slot : slots) part.add_slots(slot);
    if (gang) {
      xmod::v1::GangPart* g = part.mutable_gang();
      g->set_member(static_cast<int32_t>(m));
      g->set_members(static_cast<int32_t>(placement.members.size()));
      g->set_rank_offset(static_cast<int32_t>(m * slots.size()));
      g->set_world_size(world);
      g->set_rendezvous(rendezvous);
      g->set_host(worker.host);
    } else {
      part.set_lease_ttl_ms(member.lease_expires_ms - arrived);
    }
    parts.push_back(std::move(part));
    names.push_back(worker.name);
    slot_lists.push_back(absl::StrJoin(slots, ","));
  }
  if (gang) attempt.parts = parts;
  attempt.rendezvous = rendezvous;
  attempts_[{run_id, run.attempts}] = attempt;

  AttemptStart start;
  start.run_id = run_id;
  start.attempt = run.attempts;
  start.worker_id = placement.members[0].first;
  start.worker = absl::StrJoin(names, ",");
  start.slots = absl::StrJoin(slot_lists, ";");
  start.started_ms = now;
  start.resumed_from_step = resumed_from;
  start.lease_expires_ms = now + (gang ? options_.gang_start_timeout_ms : options_.lease_ttl_ms);
  start.rendezvous = rendezvous;
  std::vector<Store::WriteFn> writes;
  writes.push_back([start, sweep_id = *sweep_id, attempts = run.attempts, rendezvous](Db& db) {
    if (absl::Status s = InsertAttempt(db, start); !s.ok()) return s;
    RunUpdate u;
    u.run_id = start.run_id;
    u.state = xmod::v1::RUNNING;
    u.attempts = attempts;
    if (absl::Status s = UpdateRun(db, u); !s.ok()) return s;
    if (absl::Status s = MarkRunStarted(db, start.run_id, start.started_ms); !s.ok()) return s;
    return InsertEvent(
        db, start.started_ms, "attempt_started", sweep_id, start.run_id,
        absl::StrCat("attempt ", start.attempt, " on ", start.worker,
                     rendezvous.empty() ? "" : absl::StrCat(" (gang, ", rendezvous, ")"),
                     start.resumed_from_step > 0
                         ? absl::StrCat(" from step ", start.resumed_from_step)
                         : ""));
  });
  if (absl::Status s = CommitLocked(std::move(writes), change); !s.ok()) return s;
  return parts;
}

std::optional<xmod::v1::Assignment> Scheduler::TakePartLocked(int64_t worker_id, int64_t arrived) {
  const int64_t mono = clock_->MonotonicMillis();
  for (auto& [key, attempt] : attempts_) {
    auto run = runs_.find(key.first);
    // A cancelled run's parts are never handed out; its members' leases lapse.
    if (attempt.parts.empty() || run == runs_.end() || run->second.current_attempt != key.second ||
        run->second.state != xmod::v1::RUNNING) {
      continue;
    }
    for (size_t m = 0; m < attempt.members.size(); ++m) {
      Member& member = attempt.members[m];
      if (member.worker_id != worker_id || member.delivered) continue;
      WorkerEntry& worker = workers_.at(worker_id);
      member.delivered = true;
      member.worker_epoch = worker.epoch;
      member.lease_expires_ms = mono + options_.lease_ttl_ms;
      for (int32_t slot : member.slots) {
        worker.free_slots.erase(
            std::remove(worker.free_slots.begin(), worker.free_slots.end(), slot),
            worker.free_slots.end());
      }
      xmod::v1::Assignment part = attempt.parts[m];
      part.set_lease_ttl_ms(member.lease_expires_ms - arrived);
      return part;
    }
  }
  return std::nullopt;
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
    auto it = workers_.find(worker_id);
    if (it == workers_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("unknown worker ", worker_id, ": register again"));
    }
    WorkerEntry& worker = it->second;
    worker.free_slots.assign(request.free_slots().begin(), request.free_slots().end());
    // While it polls, its free slots are current: gangs placed by others may use them.
    worker.polling += 1;
    while (!shutdown_) {
      assignment = TakePartLocked(worker_id, arrived);
      if (assignment || request.free_slots().empty()) break;
      int64_t next_ready = -1;
      const int64_t now = clock_->MonotonicMillis();
      if (std::optional<Placement> placement = PlanLocked(worker_id, now, &next_ready)) {
        int64_t sweep_id = 0;
        absl::StatusOr<std::vector<xmod::v1::Assignment>> parts =
            LeaseLocked(*placement, arrived, &sweep_id);
        if (!parts.ok()) {
          status = parts.status();
          break;
        }
        started.push_back({sweep_id, placement->run_id});
        if (placement->members.size() == 1) {
          assignment = std::move(parts->front());
          break;
        }
        queue_changed_.SignalAll();  // wakes the other members' polls
        continue;                    // this worker's part, if any, is taken above
      }
      if (absl::Now() >= deadline) break;
      absl::Time wake = deadline;
      if (next_ready >= 0)
        wake = std::min(wake, absl::Now() + absl::Milliseconds(next_ready - now));
      queue_changed_.WaitWithDeadline(&mu_, wake);
    }
    worker.polling -= 1;
    worker.poll_ended_ms = clock_->MonotonicMillis();
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

Scheduler::Checkpoint Scheduler::CheckpointOf(const xmod::v1::Checkpoint& stored) {
  return Checkpoint{stored.step(), stored.path(), stored.sha256(), stored.bytes()};
}

xmod::v1::ResumePoint Scheduler::ResumePointOf(const Checkpoint& checkpoint) {
  xmod::v1::ResumePoint point;
  point.set_path(checkpoint.path);
  point.set_sha256(checkpoint.sha256);
  point.set_step(checkpoint.step);
  point.set_bytes(checkpoint.bytes);
  return point;
}

std::string Scheduler::CheckpointDir(int64_t sweep_id, int64_t run_id) const {
  return absl::StrCat(options_.checkpoint_root, "/sweep-", sweep_id, "/run-", run_id);
}

Scheduler::Retry Scheduler::RetryOfFailure(RunEntry& run, int exit_code) {
  switch (RetryPolicyOf(exit_code)) {
    case ExitRetry::kNever:
      return Retry::kNever;
    case ExitRetry::kRetryOnce:
      run.oom_failures += 1;
      return run.oom_failures > 1 ? Retry::kNever : Retry::kFailure;
    case ExitRetry::kRequeue:
      return Retry::kRequeue;
    case ExitRetry::kRetry:
      break;
  }
  return Retry::kFailure;
}

Scheduler::Retry Scheduler::LostRetryLocked(const AttemptKey& key, Change* change) {
  SaveLocked(*change, key.first);
  auto run = runs_.find(key.first);
  if (run == runs_.end() || run->second.current_attempt != key.second) return Retry::kRequeue;
  run->second.lost += 1;
  if (run->second.lost <= options_.max_lost_attempts) return Retry::kRequeue;
  LOG(WARNING) << "run " << key.first << " lost " << run->second.lost
               << " leases: failing it instead of requeueing";
  return Retry::kNever;
}

void Scheduler::EndAttemptLocked(const AttemptKey& key, const std::string& outcome, Retry retry,
                                 int exit_code, const std::string& error, int64_t now, int64_t mono,
                                 std::vector<Store::WriteFn>* writes, std::vector<Touched>* touched,
                                 Change* change) {
  const auto [run_id, attempt] = key;
  SaveLocked(*change, key);
  SaveLocked(*change, run_id);
  attempts_.erase(key);
  writes->push_back([run_id = run_id, attempt = attempt, outcome, exit_code, error, now](Db& db) {
    return EndAttempt(db, run_id, attempt, outcome, exit_code, error, now);
  });
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.current_attempt != attempt) return;
  RunEntry& run = it->second;
  run.current_attempt = 0;
  touched->push_back({run.sweep_id, run_id});
  change->ended_runs.push_back(run.name);
  const int64_t sweep_id = run.sweep_id;
  const std::string reason = ExitReason(exit_code);
  const std::string event_text = absl::StrCat(
      "attempt ", attempt, " ", outcome,
      reason.empty() || outcome != "failed" ? ""
                                            : absl::StrCat(" (", reason, ", exit ", exit_code, ")"),
      error.empty() ? "" : ": ", error);
  RunUpdate u;
  u.run_id = run_id;
  std::string kind = absl::StrCat("attempt_", outcome);
  const bool failure = retry != Retry::kRequeue;
  if (run.state == xmod::v1::CANCELLED) {
    runs_.erase(it);  // its cancellation is already stored
  } else if (outcome == "succeeded") {
    u.state = xmod::v1::SUCCEEDED;
    u.finished_ms = now;
    u.error = "";
    runs_.erase(it);
  } else if (outcome == "cancelled") {
    u.state = xmod::v1::CANCELLED;
    u.finished_ms = now;
    runs_.erase(it);
  } else {
    if (failure) {
      run.failures += 1;
      u.failures = run.failures;
      u.error = event_text;
    }
    if (retry == Retry::kNever || (failure && run.failures >= run.max_attempts)) {
      u.state = xmod::v1::FAILED;
      u.finished_ms = now;
      if (retry != Retry::kNever) {
        u.error = absl::StrCat(event_text, " (", run.failures, " of ", run.max_attempts,
                               " attempts failed)");
      } else if (outcome == "lost") {
        u.error = absl::StrCat(event_text, " (", run.lost, " leases lost: not requeued again)");
      } else if (exit_code == kExitOutOfMemory) {
        u.error = absl::StrCat(event_text, " (out of memory again: not retried)");
      } else {
        u.error = absl::StrCat(event_text, " (not retried: a retry would fail the same way)");
      }
      kind = "run_failed";
      runs_.erase(it);
    } else {
      const int64_t backoff = failure ? BackoffMillis(run.failures) : 0;
      run.not_before_ms = mono + backoff;
      u.state = xmod::v1::QUEUED;
      u.not_before_ms = now + backoff;
      EnqueueLocked(run_id, run);
    }
  }
  writes->push_back([u, kind, sweep_id, run_id = run_id, event_text, now](Db& db) {
    if (absl::Status s = UpdateRun(db, u); !s.ok()) return s;
    return InsertEvent(db, now, kind, sweep_id, run_id, event_text);
  });
}

absl::Status Scheduler::FinishRun(const xmod::v1::FinishRunRequest& request) {
  std::string outcome;
  switch (request.outcome()) {
    case xmod::v1::OUTCOME_SUCCEEDED:
      outcome = "succeeded";
      break;
    case xmod::v1::OUTCOME_FAILED:
      outcome = "failed";
      break;
    case xmod::v1::OUTCOME_CANCELLED:
      outcome = "cancelled";
      break;
    case xmod::v1::OUTCOME_PREEMPTED:
      outcome = "preempted";
      break;
    default:
      return absl::InvalidArgumentError("outcome: must be set");
  }
  if (request.last_seq() < 0) return absl::InvalidArgumentError("last_seq: must be >= 0");
  const int64_t now = clock_->NowMillis();
  const int64_t mono = clock_->MonotonicMillis();
  std::vector<Store::WriteFn> writes;
  std::vector<Touched> touched;
  absl::Status status;
  bool out_of_memory = false;
  {
    absl::MutexLock lock(&mu_);
    const AttemptKey key{request.run_id(), request.attempt()};
    auto it = attempts_.find(key);
    if (it == attempts_.end()) return absl::OkStatus();  // already ended (e.g. lost)
    const Member* member = MemberOn(it->second, request.worker_id());
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
    Change change;
    std::string error = request.error();
    if (it->second.members.size() > 1) {
      error = absl::StrCat("gang member ", index, " (", member->worker, "): ", error);
    }
    Retry retry = Retry::kRequeue;
    if (request.outcome() == xmod::v1::OUTCOME_SUCCEEDED && request.last_seq() > 0 &&
        it->second.acked_seq < request.last_seq()) {
      // Points the trainer produced are missing: not a success. The retry resumes from the
      // latest checkpoint, before which every point is durable, and produces the rest again.
      outcome = "failed";
      retry = Retry::kFailure;
      error = absl::StrCat("metrics incomplete: durable up to seq ",
                           std::max<int64_t>(it->second.acked_seq, 0), " of ", request.last_seq(),
                           "; retrying from the latest checkpoint");
      LOG(WARNING) << "run " << request.run_id() << " attempt " << request.attempt() << ": "
                   << error;
    } else if (request.outcome() == xmod::v1::OUTCOME_FAILED) {
      auto run = runs_.find(request.run_id());
      if (run != runs_.end()) {
        SaveLocked(change, request.run_id());
        retry = RetryOfFailure(run->second, request.exit_code());
      } else {
        retry = Retry::kFailure;
      }
    }
    EndAttemptLocked(key, outcome, retry, request.exit_code(), error, now, mono, &writes, &touched,
                     &change);
    out_of_memory =
        request.outcome() == xmod::v1::OUTCOME_FAILED && request.exit_code() == kExitOutOfMemory;
    if (out_of_memory) {
      writes.push_back([](Db& db) { return AddToCounter(db, kOomExitsCounter, 1); });
    }
    status = CommitLocked(std::move(writes), change);
  }
  if (!status.ok()) return status;
  if (out_of_memory && metrics_ != nullptr) metrics_->AddOomExits(1);
  Publish(touched);
  return status;
}

int Scheduler::ExpireLeases() {
  const int64_t now = clock_->NowMillis();
  const int64_t mono = clock_->MonotonicMillis();
  std::vector<Store::WriteFn> writes;
  std::vector<Touched> touched;
  int expired = 0;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::pair<AttemptKey, std::string>> lapsed;  // and why
    for (const auto& [key, attempt] : attempts_) {
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
    Change change;
    for (const auto& [key, reason] : lapsed) {
      LOG(WARNING) << "run " << key.first << " attempt " << key.second << ": " << reason;
      const Retry retry = LostRetryLocked(key, &change);
      EndAttemptLocked(key, "lost", retry, 0, reason, now, mono, &writes, &touched, &change);
    }
    int connected = 0;
    for (const auto& [id, worker] : workers_) {
      if (mono - worker.last_seen_ms <= options_.lease_ttl_ms) ++connected;
    }
    if (metrics_ != nullptr) metrics_->SetWorkersConnected(connected);
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

void Scheduler::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  queue_changed_.SignalAll();
}

std::optional<int64_t> Scheduler::LeaseExpiry(int64_t run_id, int attempt) {
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find({run_id, attempt});
  if (it == attempts_.end()) return std::nullopt;
  int64_t earliest = it->second.members.front().lease_expires_ms;
  for (const Member& m : it->second.members) earliest = std::min(earliest, m.lease_expires_ms);
  return earliest;
}

}  // namespace xmod
