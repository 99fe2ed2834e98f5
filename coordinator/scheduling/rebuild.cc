// See scheduler.h, "State". This file: Rebuild, the restart of the scheduler from the
// database — the live runs, their resume points, open attempts with their members and
// leases, and the workers — with the database's wall-clock times turned into monotonic ones.
#include <algorithm>
#include <map>
#include <utility>

#include "coordinator/scheduling/scheduler.h"
#include "coordinator/store/scheduler_rows.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/store_writes.h"
#include "glog/logging.h"

namespace xmod {
namespace {

using scheduling::LiveState;

// The wall clock (`now`) and the monotonic one (`mono`) at the rebuild.
struct RebuildClock {
  int64_t now = 0;
  int64_t mono = 0;
};

// `previous`: by run, the fallback of its latest checkpoint.
void RestoreRuns(const std::vector<RunQueueEntry>& rows,
                 const std::map<int64_t, xmod::v1::Checkpoint>& previous, const RebuildClock& clock,
                 LiveState& live) {
  for (const RunQueueEntry& e : rows) {
    scheduling::RunEntry& run = live.runs[e.run_id];
    run.sweep_id = e.sweep_id;
    run.priority = e.priority;
    run.state = e.state;
    run.attempts = e.attempts;
    run.failures = e.failures;
    run.oom_failures = e.oom_failures;
    run.max_attempts = e.max_attempts;
    run.not_before_ms = clock.mono + std::max<int64_t>(0, e.not_before_ms - clock.now);
    run.name = e.name;
    run.spec = e.spec;
    if (e.latest_checkpoint) {
      run.latest_checkpoint = scheduling::ResumeCheckpointOf(*e.latest_checkpoint);
    }
    if (auto p = previous.find(e.run_id); p != previous.end()) {
      run.previous_checkpoint = scheduling::ResumeCheckpointOf(p->second);
    }
  }
}

// Open attempts keep their leases, with one TTL of grace from the restart for workers to
// reattach.
void RestoreAttempts(const std::vector<OpenAttempt>& rows, const RebuildClock& clock,
                     int64_t lease_ttl_ms, LiveState& live) {
  for (const OpenAttempt& a : rows) {
    scheduling::AttemptEntry entry;
    entry.rendezvous = a.rendezvous;
    for (const AttemptMemberRow& row : a.members) {
      scheduling::Member& member = entry.members.emplace_back();
      member.worker_id = row.worker_id;
      member.worker = row.worker;
      member.slots = row.slots;
      member.lease_expires_ms = clock.mono + std::max(a.lease_expires_ms - clock.now, lease_ttl_ms);
    }
    live.attempts[{a.run_id, a.attempt}] = std::move(entry);
    auto run = live.runs.find(a.run_id);
    if (run != live.runs.end() && a.attempt == run->second.attempts) {
      run->second.current_attempt = a.attempt;
    }
  }
}

// Open attempts that are their run's current one take metric points again from where the
// database has them.
void OpenForIngest(const std::vector<OpenAttempt>& rows, const LiveState& live,
                   MetricIngest& ingest) {
  for (const OpenAttempt& a : rows) {
    auto run = live.runs.find(a.run_id);
    if (run == live.runs.end() || run->second.current_attempt != a.attempt) continue;
    const int64_t reporter = a.members.empty() ? 0 : a.members.front().worker_id;
    ingest.Open({a.run_id, a.attempt},
                {reporter, run->second.sweep_id, run->second.name, a.max_seq});
    if (run->second.state == xmod::v1::CANCELLED) ingest.MarkCancelled({a.run_id, a.attempt});
  }
}

// Queues the QUEUED runs. RUNNING without an open attempt cannot come from a committed
// transaction of this code; such a run is requeued (its write appended to `writes`) rather
// than stranded.
void QueueRuns(LiveState& live, std::vector<Store::WriteFn>* writes) {
  for (auto& [run_id, run] : live.runs) {
    if (run.state == xmod::v1::QUEUED) {
      live.queue.insert(scheduling::QueueKeyOf(run_id, run));
    } else if (run.state == xmod::v1::RUNNING && run.current_attempt == 0) {
      run.state = xmod::v1::QUEUED;
      live.queue.insert(scheduling::QueueKeyOf(run_id, run));
      writes->push_back([id = run_id](Db& db) {
        RunUpdate u;
        u.run_id = id;
        u.state = xmod::v1::QUEUED;
        return UpdateRun(db, u);
      });
    }
  }
}

// The snapshot, and by run the fallback of its latest checkpoint (the one before the last,
// ordered by step).
absl::Status ReadSnapshot(Store* store, SchedulerSnapshot* snap,
                          std::map<int64_t, xmod::v1::Checkpoint>* previous) {
  return store->Read([snap, previous](Db& db) {
    absl::StatusOr<SchedulerSnapshot> s = LoadSchedulerSnapshot(db);
    if (!s.ok()) return s.status();
    *snap = *std::move(s);
    for (const RunQueueEntry& e : snap->runs) {
      absl::StatusOr<std::vector<xmod::v1::Checkpoint>> all = LoadCheckpoints(db, e.run_id);
      if (!all.ok()) return all.status();
      if (all->size() >= 2) (*previous)[e.run_id] = (*all)[all->size() - 2];
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status Scheduler::Rebuild() {
  SchedulerSnapshot snap;
  std::map<int64_t, xmod::v1::Checkpoint> previous;
  if (absl::Status s = ReadSnapshot(store_, &snap, &previous); !s.ok()) return s;
  // The database holds wall-clock times; memory keeps monotonic ones.
  const RebuildClock clock{clock_->NowMillis(), clock_->MonotonicMillis()};
  std::vector<Store::WriteFn> writes;
  {
    absl::MutexLock lock(&mu_);
    workers_.Restore(snap.workers, clock.now, clock.mono);
    RestoreRuns(snap.runs, previous, clock, live_);
    RestoreAttempts(snap.open_attempts, clock, options_.lease_ttl_ms, live_);
    OpenForIngest(snap.open_attempts, live_, *ingest_);
    QueueRuns(live_, &writes);
    if (metrics_ != nullptr) {
      // The counts since the database was created, not since this process started.
      metrics_->AddLeasesExpired(snap.counters[kLeasesLostCounter]);
      metrics_->AddOomExits(snap.counters[kOomExitsCounter]);
    }
    LOG(INFO) << "scheduler: rebuilt " << live_.runs.size() << " live runs, " << live_.queue.size()
              << " queued, " << live_.attempts.size() << " open attempts, "
              << workers_.entries().size() << " workers";
  }
  if (absl::Status s = RestoreSharing(clock.mono, snap.counters); !s.ok()) return s;
  if (writes.empty()) return absl::OkStatus();
  return Submit(std::move(writes)).get();
}

}  // namespace xmod
