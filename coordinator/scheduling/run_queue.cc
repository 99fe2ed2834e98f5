// See scheduler.h. This file: the run queue and the user actions on it — submitting sweeps
// and runs, cancelling, stopping early, resuming and retrying.
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/store/design_store.h"
#include "coordinator/store/event_rows.h"
#include "coordinator/store/scheduler_rows.h"
#include "coordinator/store/sharing_rows.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/store_writes.h"

namespace xmod {

using scheduling::PendingChanges;
using scheduling::QueueKeyOf;
using scheduling::ResumeCheckpoint;
using scheduling::ResumeCheckpointOf;
using scheduling::RunEntry;

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

}  // namespace

void Scheduler::EnqueueLocked(int64_t run_id, RunEntry& run) {
  run.state = xmod::v1::QUEUED;
  live_.queue.insert(QueueKeyOf(run_id, run));
  queue_changed_.SignalAll();
}

absl::StatusOr<int64_t> Scheduler::SubmitSweep(const xmod::v1::SweepSpec& spec,
                                               std::vector<xmod::v1::Run>* runs,
                                               const std::string& submitter) {
  const int64_t now = clock_->NowMillis();
  int64_t sweep_id = 0;
  absl::Status status = store_->WriteAndWait([&](Db& db) {
    absl::StatusOr<int64_t> id = InsertSweep(db, spec, submitter, now);
    if (!id.ok()) return id.status();
    sweep_id = *id;
    if (absl::Status s = InsertRuns(db, sweep_id, runs, now); !s.ok()) return s;
    return InsertEvent(
        db, now, xmod::v1::EVENT_SWEEP_SUBMITTED, sweep_id, 0,
        absl::StrCat(spec.name(), ": ", runs->size(), " runs, priority ", spec.priority()),
        submitter);
  });
  if (!status.ok()) return status;
  QueueStored(sweep_id, *runs, submitter);
  return sweep_id;
}

absl::Status Scheduler::AddRuns(int64_t sweep_id, std::vector<xmod::v1::Run>* runs,
                                Store::WriteFn also, const std::optional<std::string>& actor) {
  const int64_t now = clock_->NowMillis();
  std::string submitter;
  absl::Status status = store_->WriteAndWait([&](Db& db) {
    if (absl::Status s = CheckSweepOpen(db, sweep_id); !s.ok()) return s;
    absl::StatusOr<std::string> owner = LoadSweepSubmitter(db, sweep_id);
    if (!owner.ok()) return owner.status();
    submitter = *std::move(owner);
    if (absl::Status s = InsertRuns(db, sweep_id, runs, now); !s.ok()) return s;
    if (absl::Status s = also(db); !s.ok()) return s;
    return InsertEvent(db, now, xmod::v1::EVENT_RUNS_ADDED, sweep_id, 0,
                       absl::StrCat(runs->size(), " runs"), actor);
  });
  if (!status.ok()) return status;
  QueueStored(sweep_id, *runs, submitter);
  return absl::OkStatus();
}

void Scheduler::QueueStored(int64_t sweep_id, const std::vector<xmod::v1::Run>& runs,
                            const std::string& user) {
  {
    absl::MutexLock lock(&mu_);
    for (const xmod::v1::Run& r : runs) {
      RunEntry& run = live_.runs[r.id()];
      run.sweep_id = sweep_id;
      run.priority = r.priority();
      run.max_attempts = r.max_attempts();
      run.name = r.name();
      run.spec = r.spec();
      run.user = user;
      run.preemptible = r.preemptible();
      EnqueueLocked(r.id(), run);
    }
  }
  for (const xmod::v1::Run& r : runs) feed_->Publish(sweep_id, r.id());
}

absl::Status Scheduler::CancelRun(int64_t run_id, const std::optional<std::string>& actor,
                                  const std::string& reason) {
  return EndRunByUser(run_id, std::nullopt, actor, reason);
}

absl::Status Scheduler::StopEarly(int64_t run_id, double flops, double live_delta,
                                  const std::string& reason) {
  return EndRunByUser(run_id, Censoring{flops, live_delta, reason}, std::nullopt, reason);
}

absl::Status Scheduler::EndRunByUser(int64_t run_id, std::optional<Censoring> censoring,
                                     const std::optional<std::string>& actor,
                                     const std::string& reason) {
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
    auto it = live_.runs.find(run_id);
    if (it == live_.runs.end() || it->second.state == xmod::v1::CANCELLED) {
      if (stored->state() == xmod::v1::CANCELLED) return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrCat("run ", run_id, " already ended ",
                                                        xmod::v1::RunState_Name(stored->state())));
    }
    PendingChanges change;
    change.Save(live_, run_id);
    RunEntry& run = it->second;
    live_.queue.erase(QueueKeyOf(run_id, run));
    run.state = xmod::v1::CANCELLED;
    change.RunEnded(run.name);
    const int64_t sweep_id = run.sweep_id;
    if (run.current_attempt == 0) live_.runs.erase(it);  // else kept until its attempt ends
    std::vector<Store::WriteFn> writes;
    writes.push_back([run_id, sweep_id, now, censoring, actor, reason](Db& db) {
      RunUpdate u;
      u.run_id = run_id;
      u.state = xmod::v1::CANCELLED;
      u.finished_ms = now;
      if (!reason.empty()) u.error = reason;
      if (absl::Status s = UpdateRun(db, u); !s.ok()) return s;
      if (!censoring)
        return InsertEvent(db, now, xmod::v1::EVENT_RUN_CANCELLED, sweep_id, run_id, reason, actor);
      if (absl::Status s = InsertCensoredRun(db, run_id, censoring->flops, censoring->live_delta,
                                             censoring->reason, now);
          !s.ok()) {
        return s;
      }
      return InsertEvent(db, now, xmod::v1::EVENT_RUN_STOPPED_EARLY, sweep_id, run_id,
                         censoring->reason);
    });
    status = CommitLocked(std::move(writes), change);
  }
  if (status.ok()) feed_->Publish(stored->sweep_id(), run_id);
  return status;
}

absl::Status Scheduler::CancelSweep(int64_t sweep_id, const std::optional<std::string>& actor) {
  const int64_t now = clock_->NowMillis();
  std::vector<Store::WriteFn> writes;
  std::vector<Touched> touched;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    PendingChanges change;
    for (auto it = live_.runs.begin(); it != live_.runs.end();) {
      RunEntry& run = it->second;
      const int64_t run_id = it->first;
      if (run.sweep_id != sweep_id || run.state == xmod::v1::CANCELLED) {
        ++it;
        continue;
      }
      change.Save(live_, run_id);
      live_.queue.erase(QueueKeyOf(run_id, run));
      run.state = xmod::v1::CANCELLED;
      change.RunEnded(run.name);
      touched.push_back({sweep_id, run_id});
      writes.push_back([run_id, now](Db& db) {
        RunUpdate u;
        u.run_id = run_id;
        u.state = xmod::v1::CANCELLED;
        u.finished_ms = now;
        return UpdateRun(db, u);
      });
      it = run.current_attempt == 0 ? live_.runs.erase(it) : std::next(it);
    }
    writes.push_back([sweep_id, now, n = touched.size(), actor](Db& db) {
      if (absl::Status s = MarkSweepCancelled(db, sweep_id); !s.ok()) return s;
      return InsertEvent(db, now, xmod::v1::EVENT_SWEEP_CANCELLED, sweep_id, 0,
                         absl::StrCat(n, " runs cancelled"), actor);
    });
    status = CommitLocked(std::move(writes), change);
  }
  if (!status.ok()) return status;
  Publish(touched);
  feed_->Publish(sweep_id, 0);
  return status;
}

absl::Status Scheduler::Requeue(const xmod::v1::Run& stored,
                                std::optional<ResumeCheckpoint> checkpoint, const std::string& user,
                                bool preemptible, const std::optional<std::string>& actor) {
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
    if (live_.runs.count(run_id) > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "run ", run_id, " is still stopping its last attempt; resume it once that ended"));
    }
    PendingChanges change;
    change.Save(live_, run_id);
    RunEntry& run = live_.runs[run_id];
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
    run.user = user;
    run.preemptible = preemptible;
    EnqueueLocked(run_id, run);
    std::vector<Store::WriteFn> writes;
    writes.push_back([run_id, sweep_id = stored.sweep_id(), now, actor](Db& db) {
      RunUpdate u;
      u.run_id = run_id;
      u.state = xmod::v1::QUEUED;
      u.failures = 0;
      u.oom_failures = 0;  // a resumed run starts from its submitted memory plan again
      u.not_before_ms = 0;
      u.error = "";
      u.finished_ms = 0;
      if (absl::Status s = UpdateRun(db, u); !s.ok()) return s;
      return InsertEvent(db, now, xmod::v1::EVENT_RUN_RESUMED, sweep_id, run_id, "", actor);
    });
    status = CommitLocked(std::move(writes), change);
  }
  if (status.ok()) feed_->Publish(stored.sweep_id(), run_id);
  return status;
}

absl::Status Scheduler::ResumeRun(int64_t run_id, const std::optional<std::string>& actor) {
  xmod::v1::Run stored;
  std::optional<xmod::v1::Checkpoint> checkpoint;
  RunSharingRow sharing;
  if (absl::Status s = store_->Read([&](Db& db) {
        absl::StatusOr<xmod::v1::Run> run = LoadRun(db, run_id);
        if (!run.ok()) return run.status();
        stored = *std::move(run);
        absl::StatusOr<RunSharingRow> facts = LoadRunSharing(db, run_id);
        if (!facts.ok()) return facts.status();
        sharing = *std::move(facts);
        absl::StatusOr<std::optional<xmod::v1::Checkpoint>> c = LatestCheckpoint(db, run_id);
        if (!c.ok()) return c.status();
        checkpoint = *c;
        return absl::OkStatus();
      });
      !s.ok()) {
    return s;
  }
  std::optional<ResumeCheckpoint> resume;
  if (checkpoint) resume = ResumeCheckpointOf(*checkpoint);
  return Requeue(stored, resume, sharing.submitter, sharing.preemptible, actor);
}

absl::StatusOr<std::vector<int64_t>> Scheduler::RetryFailed(
    int64_t sweep_id, const std::optional<std::string>& actor) {
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
    absl::Status s = ResumeRun(run.id(), actor);
    if (s.ok()) {
      ids.push_back(run.id());
    } else if (!absl::IsFailedPrecondition(s)) {
      return s;
    }
  }
  const int64_t now = clock_->NowMillis();
  if (absl::Status s = store_->WriteAndWait([&](Db& db) {
        return InsertEvent(db, now, xmod::v1::EVENT_SWEEP_RETRIED, sweep_id, 0,
                           absl::StrCat(ids.size(), " failed runs requeued"), actor);
      });
      !s.ok()) {
    return s;
  }
  return ids;
}

}  // namespace xmod
