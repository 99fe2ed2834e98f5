// Scheduler: the run queue, worker registry and attempt leases, and metric / checkpoint
// ingest of running attempts.
//
// Pull model: workers long-poll Acquire(); each attempt holds a lease that Heartbeat()
// renews; ExpireLeases() ends attempts whose lease lapsed as "lost" and requeues their run
// at once: a lost lease is not the run's failure and does not use up an attempt (the bound
// is max_lost_attempts, kept in memory). Failed attempts requeue with exponential backoff,
// until a run has failed max_attempts times (then FAILED). A retry resumes from the run's
// latest recorded checkpoint (any attempt), with the one before it as a fallback
// (Assignment.fallbacks); a checkpoint the trainer refuses (ReportCheckpoint{rejected}: its
// digest does not match, it is missing, or it does not load) is deleted from the
// checkpoints table so it is never offered again, and the attempt's resumed_from_step and
// error note the fallback (shown by `xmodctl run show`) with a "checkpoint_rejected" event.
// Replies carry lease_ttl_ms so the worker can fence its trainers (worker/agent.h).
//
// Gangs (training.ranks_per_worker = P > 0 with ranks R > P): one attempt spans R / P
// workers, its members, each running P ranks; member 0 runs rank 0, serves the TCPStore on
// its advertised host and a port from its declared range, and alone reports metrics and
// checkpoints. No two open attempts share a rendezvous address: it is stored with the
// attempt (attempts.rendezvous), so a restart still holds the ports of running gangs, and a
// gang whose ready hosts have every port held is not placed (it waits, PendingReason says
// why, and it reserves workers as below) until an attempt holding one ends. Placement is all or
// nothing: the attempt row is written once with every member (worker "a,b", slots "0;0"), the
// polling worker gets its part at once and each other member when it next polls. Each member holds
// its own lease; a member that does not take its part within gang_start_timeout_ms, a member's
// lapsed lease, or a member's failed, preempted or cancelled FinishRun ends the attempt for all
// (the other members get KILL orders), and the run resumes from its latest checkpoint on a fresh
// gang. A member other than 0 finishing SUCCEEDED ends nothing: rank 0's outcome is the attempt's.
// Policy: priority, then FIFO (the queue order), with reservation. The first ready gang
// that cannot be placed reserves the R / P live workers (not reserved ahead of it) with
// room for P ranks that are closest to fitting; nothing behind it is leased on them, so
// they drain and the gang starts (no starvation by small runs), while workers outside the
// reservation take runs from further back (backfill). Nothing is held before a placement,
// so two gangs cannot each hold part of what the other needs (no deadlock); a later gang
// may only reserve workers an earlier one did not. A single-worker run needing more slots
// than are free on the polling worker reserves that worker in the same way.
// Cancelled runs get STOP orders in heartbeat replies; attempts that are no longer current
// get KILL orders (never a SIGTERM that would let them checkpoint). A trainer that hangs is
// the worker's to kill (its stall timeout, worker/agent.h), so a heartbeat keeps a lease only
// while the worker's trainer makes step progress.
//
// Failures: FinishRun's exit code (trainer_contract/exit_codes.h) decides the retry. Invalid
// configuration and a diverged loss fail the run at once; out of memory is retried once and
// fails the run the second time; anything else is retried with backoff. A run is SUCCEEDED
// only when every metric point the attempt produced (FinishRunRequest.last_seq) is durable;
// otherwise the attempt counts as a retryable failure and the retry re-produces the missing
// points from the latest checkpoint (whose earlier points are durable by construction).
//
// State: the database is the truth. The scheduler keeps a memory copy of the live part
// (queued and running runs, open attempts, workers), rebuilt by Create() from the database
// after a restart; open attempts then keep their leases, extended by one TTL from the
// restart, so reattaching workers continue. Memory follows the database: an operation that
// changes the queue, a run or an attempt commits its writes while holding the lock and
// keeps its memory change only when the commit succeeded (a failed commit, e.g. a full disk,
// puts the memory back and returns the store's error: RESOURCE_EXHAUSTED or UNAVAILABLE);
// lease renewals and progress are applied once their commit returned. Each call returns only
// once its writes committed.
// Time: leases, backoff and worker liveness run on the Clock's monotonic reading; the wall
// clock only stamps stored times (the database holds wall-clock lease and backoff deadlines,
// converted back to the monotonic clock by Create()).
// Thread-safe.
#ifndef XMOD_COORDINATOR_SCHEDULING_SCHEDULER_H_
#define XMOD_COORDINATOR_SCHEDULING_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/store/change_feed.h"
#include "coordinator/store/store.h"
#include "xmod/v1/coordinator.pb.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

struct SchedulerOptions {
  int64_t lease_ttl_ms = 30000;
  int64_t heartbeat_interval_ms = 2000;
  // Backoff before retry n (n = failures so far): base * 2^(n-1), at most max.
  int64_t backoff_base_ms = 2000;
  int64_t backoff_max_ms = 120000;
  // Each run checkpoints into <checkpoint_root>/sweep-<S>/run-<R>.
  std::string checkpoint_root = "checkpoints";
  // Lost leases (lease expiry, a worker re-registering without the attempt) requeue the run
  // at once without counting against max_attempts; past this many since the scheduler
  // started or the run was resumed, the run FAILs instead, so it cannot loop forever.
  int max_lost_attempts = 20;
  // A gang member that has not taken its part (AcquireRun) this long after the placement
  // ends the attempt as lost and releases every member.
  int64_t gang_start_timeout_ms = 30000;
};

class Scheduler {
 public:
  // Rebuilds the live state from `store`. `store`, `clock` and `feed` must outlive the
  // scheduler; `metrics` may be null.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(Store* store, Clock* clock,
                                                           ChangeFeed* feed,
                                                           CoordinatorMetrics* metrics,
                                                           const SchedulerOptions& options);

  // --- User actions -------------------------------------------------------------------
  // Stores a sweep and its expanded runs in one transaction and queues the runs; fills in
  // the run ids. Returns the sweep id.
  absl::StatusOr<int64_t> SubmitSweep(const xmod::v1::SweepSpec& spec,
                                      std::vector<xmod::v1::Run>* runs);
  // Adds expanded `runs` to the existing sweep and queues them, in one transaction with
  // `also` (e.g. the design decision that proposed them; it sees the runs' ids); fills in
  // the run ids. FAILED_PRECONDITION when the sweep was cancelled, NOT_FOUND when it does
  // not exist; then nothing is stored.
  absl::Status AddRuns(int64_t sweep_id, std::vector<xmod::v1::Run>* runs, Store::WriteFn also);
  // QUEUED -> CANCELLED at once; RUNNING -> CANCELLED with a STOP order to its worker.
  // Cancelling a cancelled run is a no-op; a SUCCEEDED or FAILED run is FAILED_PRECONDITION.
  absl::Status CancelRun(int64_t run_id);
  // Early stopping (EarlyStopping): CancelRun, plus the run's censored_runs row (the live
  // Δ `live_delta` at `flops` and the reason) and a "run_stopped_early" event.
  absl::Status StopEarly(int64_t run_id, double flops, double live_delta,
                         const std::string& reason);
  // Cancels every queued or running run of the sweep and marks the sweep cancelled.
  absl::Status CancelSweep(int64_t sweep_id);
  // FAILED or CANCELLED -> QUEUED with a fresh allowance of attempts; the next attempt
  // resumes from the latest checkpoint. FAILED_PRECONDITION for other states.
  absl::Status ResumeRun(int64_t run_id);
  // ResumeRun for every FAILED run of a sweep; returns their ids.
  absl::StatusOr<std::vector<int64_t>> RetryFailed(int64_t sweep_id);

  // --- Worker API ---------------------------------------------------------------------
  absl::StatusOr<xmod::v1::RegisterResponse> Register(const xmod::v1::RegisterRequest& request);
  absl::StatusOr<xmod::v1::HeartbeatResponse> Heartbeat(const xmod::v1::HeartbeatRequest& request);
  // Waits up to request.wait_ms (real time) for this worker's part of a gang placed
  // earlier, or for a queued run whose backoff has passed and that can be placed by the
  // policy above: on this worker's first W free slots (W = training.ranks, 0 = 1), or as a
  // gang across this and other polling workers. nullopt when nothing came.
  // FAILED_PRECONDITION for an unknown worker (it should register again).
  absl::StatusOr<std::optional<xmod::v1::Assignment>> Acquire(
      const xmod::v1::AcquireRunRequest& request);
  // Stores points idempotently (by run, attempt, seq) and acknowledges the highest seq up to
  // which every point is durable. A stale attempt's points are acknowledged, not stored,
  // and the reply says stale.
  absl::StatusOr<xmod::v1::ReportMetricsResponse> ReportMetrics(
      const xmod::v1::ReportMetricsRequest& request);
  // Records a checkpoint of the current attempt (a resume point). FAILED_PRECONDITION for a
  // stale attempt; INVALID_ARGUMENT, storing nothing, for a path outside the run's
  // checkpoint folder (CheckReportedPath).
  absl::Status ReportCheckpoint(const xmod::v1::ReportCheckpointRequest& request);
  // Ends an attempt. Succeeded -> SUCCEEDED when every point up to last_seq is durable (else
  // a retryable failure); failed -> by the exit code's retry policy (exit_codes.h): requeued
  // with backoff, or FAILED at once or when out of attempts; preempted -> requeued at once
  // without counting as a failure; cancelled -> CANCELLED. Finishing an attempt that
  // already ended is a no-op.
  absl::Status FinishRun(const xmod::v1::FinishRunRequest& request);

  // --- Time ---------------------------------------------------------------------------
  // Ends every attempt whose lease expired; returns how many. Also refreshes the connected
  // workers gauge. Called periodically by the coordinator; tests call it after advancing a
  // FakeClock.
  int ExpireLeases();
  // Wakes long polls and makes later ones return at once.
  void Shutdown();

  // Why queued run `run_id` is not placed, as of the last time the policy passed it over
  // for a known reason (a gang waiting for a free rendezvous port); empty when none is known
  // or the run is not queued.
  std::string PendingReason(int64_t run_id);

  const SchedulerOptions& options() const { return options_; }
  // Lease deadline of an open attempt on the monotonic clock (a gang's earliest member's),
  // for tests and diagnostics.
  std::optional<int64_t> LeaseExpiry(int64_t run_id, int attempt);
  int64_t BackoffMillis(int failures) const;

 private:
  struct Checkpoint {
    int64_t step = 0;
    std::string path;
    std::string sha256;
    int64_t bytes = 0;
  };
  struct RunEntry {
    int64_t sweep_id = 0;
    int priority = 0;
    xmod::v1::RunState state = xmod::v1::QUEUED;
    int attempts = 0;
    int failures = 0;
    int max_attempts = 0;
    int oom_failures = 0;       // out-of-memory failures since submission or the last resume
    int64_t not_before_ms = 0;  // monotonic
    int current_attempt = 0;    // open attempt, 0 = none
    std::string name;
    xmod::v1::RunSpec spec;
    std::optional<Checkpoint> latest_checkpoint;
    // The good recorded checkpoint just older than latest_checkpoint: the fallback of a
    // resume (Assignment.fallbacks) should the newest fail verification.
    std::optional<Checkpoint> previous_checkpoint;
    int lost = 0;  // lost leases since the scheduler started or the run was resumed
    // Why the queued run was last passed over, where known (PendingReason); memory only.
    std::string pending_reason;
  };
  // One worker's share of an attempt (the only one, unless the run is a gang).
  struct Member {
    int64_t worker_id = 0;
    std::string worker;
    int64_t worker_epoch = 0;      // the worker's registration count when it took its part
    int64_t lease_expires_ms = 0;  // monotonic
    std::vector<int32_t> slots;
    bool delivered = true;  // the worker has its part (gang members get it when they poll)
  };
  struct AttemptEntry {
    std::vector<Member> members;  // members[0] runs rank 0: metrics and checkpoints
    int64_t acked_seq = -1;       // highest seq with every earlier point durable (-1 = none)
    // A gang's parts, built at placement (members[i] gets parts[i]); empty otherwise.
    std::vector<xmod::v1::Assignment> parts;
    // A gang's TCPStore address ("tcp://host:port", stored with the attempt); empty otherwise.
    // No two open attempts hold the same one.
    std::string rendezvous;
  };
  struct WorkerEntry {
    std::string name;
    std::vector<xmod::v1::Slot> slots;
    int64_t last_seen_ms = 0;  // monotonic
    int64_t epoch = 0;         // registrations seen by this coordinator process
    std::string host;          // advertised address (RegisterRequest.advertise_host)
    int32_t port_first = 0;    // rendezvous ports it declared (0 = none)
    int32_t port_last = 0;
    int32_t next_port = 0;  // the next one to hand out, round robin
    // Free slots as of its last AcquireRun, less those leased since; meaningful while it
    // polls (polling > 0) or stopped polling at most a heartbeat interval ago.
    std::vector<int32_t> free_slots;
    int polling = 0;
    int64_t poll_ended_ms = 0;  // monotonic
  };
  // Where a run goes: one worker's slots per member (member 0 first).
  struct Placement {
    int64_t run_id = 0;
    std::vector<std::pair<int64_t, std::vector<int32_t>>> members;  // (worker id, slots)
    int32_t port = 0;  // a gang's rendezvous port on member 0, free when planned
  };
  using QueueKey = std::tuple<int, int64_t, int64_t>;  // (-priority, sweep, run)
  using AttemptKey = std::pair<int64_t, int>;          // (run, attempt)
  // A change to publish once its write committed.
  struct Touched {
    int64_t sweep_id;
    int64_t run_id;
  };

  Scheduler(Store* store, Clock* clock, ChangeFeed* feed, CoordinatorMetrics* metrics,
            const SchedulerOptions& options);
  absl::Status Rebuild();

  // The policy (header comment): the first run to place for `poller`, if any, scanning the
  // queue in order. `next_ready` gets the earliest backoff end among runs not yet ready.
  std::optional<Placement> PlanLocked(int64_t poller, int64_t mono, int64_t* next_ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The rendezvous addresses open gangs hold.
  std::set<std::string> HeldRendezvousLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first port of `worker`'s declared range, round robin from its next_port, whose
  // address is not in `held`; nullopt when it declared none or every one is held.
  static std::optional<int32_t> FreePort(const WorkerEntry& worker,
                                         const std::set<std::string>& held);
  // Why a gang with enough ready workers (`ready`) has no member 0: none of them has a free
  // rendezvous port.
  std::string NoPortReasonLocked(const std::vector<int64_t>& ready) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `worker` is live and polling (its free slots are current).
  bool AvailableLocked(const WorkerEntry& worker, int64_t mono) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts attempt `run.attempts + 1` of `placement` (memory, then one commit): the
  // assignments of its members, member 0's first. `arrived` is when the poller's request
  // arrived (monotonic).
  absl::StatusOr<std::vector<xmod::v1::Assignment>> LeaseLocked(const Placement& placement,
                                                                int64_t arrived, int64_t* sweep_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A gang part placed for `worker_id` that it has not taken yet: marks it taken (its lease
  // starts at `arrived`) and returns it.
  std::optional<xmod::v1::Assignment> TakePartLocked(int64_t worker_id, int64_t arrived)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The member of `attempt` on `worker_id`, or null.
  static Member* MemberOn(AttemptEntry& attempt, int64_t worker_id);

  // The memory an operation changed, saved before the change so that a failed commit can put
  // it back, and what to do once the commit succeeded.
  struct Change {
    std::map<int64_t, std::optional<RunEntry>> runs;  // nullopt: the run was not in memory
    std::map<AttemptKey, std::optional<AttemptEntry>> attempts;
    std::vector<std::string> ended_runs;  // for the running-runs gauge
  };
  // How an ended attempt moves its run on.
  enum class Retry {
    kRequeue,  // at once, not counted as a failure (preempted)
    kFailure,  // with backoff, counted; FAILED once max_attempts failures are reached
    kNever,    // FAILED now: a retry would fail the same way
  };
  // Save the entry (present or not) into `change` the first time it is named.
  void SaveLocked(Change& change, int64_t run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SaveLocked(Change& change, const AttemptKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Commits `writes` as one transaction and waits, holding mu_. On success publishes the
  // change's side effects; on failure restores the saved memory and returns the error.
  absl::Status CommitLocked(std::vector<Store::WriteFn> writes, const Change& change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Ends the open attempt `key` with `outcome` and moves its run on by `retry`: requeue,
  // FAILED, or leave a cancelled run alone. Saves what it changes into `change` and appends
  // the database writes to `writes`. `now` is the wall clock, `mono` the monotonic one.
  void EndAttemptLocked(const AttemptKey& key, const std::string& outcome, Retry retry,
                        int exit_code, const std::string& error, int64_t now, int64_t mono,
                        std::vector<Store::WriteFn>* writes, std::vector<Touched>* touched,
                        Change* change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnqueueLocked(int64_t run_id, RunEntry& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues runs just stored for `sweep_id` and tells watchers.
  void QueueStored(int64_t sweep_id, const std::vector<xmod::v1::Run>& runs);
  // Why a run ended early, for its censored_runs row (StopEarly).
  struct Censoring {
    double flops = 0;
    double live_delta = 0;
    std::string reason;
  };
  // CancelRun, or StopEarly with `censoring`.
  absl::Status EndRunByUser(int64_t run_id, std::optional<Censoring> censoring);
  // The retry policy of a FAILED outcome with `exit_code` for `run`; counts an
  // out-of-memory failure on the run.
  Retry RetryOfFailure(RunEntry& run, int exit_code) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The retry of attempt `key` lost with its lease: a requeue that is not a failure, until
  // the run lost max_lost_attempts leases. Counts the loss on the run (saved in `change`).
  Retry LostRetryLocked(const AttemptKey& key, Change* change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ReportCheckpoint's path: inside the run's CheckpointDir, lexically always, and on the
  // file system (no symlink out of it, a regular file of the reported bytes) where this
  // machine sees the folder (common/confined_path.h). INVALID_ARGUMENT naming `path`.
  absl::Status CheckReportedPath(const xmod::v1::ReportCheckpointRequest& request);
  // FAILED_PRECONDITION unless `request`'s attempt is its run's current one, held by the
  // reporting worker (its gang's member 0).
  absl::Status CheckCurrentLocked(const xmod::v1::ReportCheckpointRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static Checkpoint CheckpointOf(const xmod::v1::Checkpoint& stored);
  static xmod::v1::ResumePoint ResumePointOf(const Checkpoint& checkpoint);
  // <checkpoint_root>/sweep-<S>/run-<R>: the folder of a run's checkpoints (RunSpec
  // checkpoint_dir), the only place ReportCheckpoint accepts them from.
  std::string CheckpointDir(int64_t sweep_id, int64_t run_id) const;
  // Requeues a terminal run loaded from the database (ResumeRun / RetryFailed).
  absl::Status Requeue(const xmod::v1::Run& run, std::optional<Checkpoint> checkpoint);
  // Queues `writes` as one closure (one transaction) and returns its future.
  std::future<absl::Status> Submit(std::vector<Store::WriteFn> writes);
  void Publish(const std::vector<Touched>& touched);

  Store* const store_;
  Clock* const clock_;
  ChangeFeed* const feed_;
  CoordinatorMetrics* const metrics_;
  const SchedulerOptions options_;

  absl::Mutex mu_;
  absl::CondVar queue_changed_;  // signalled when a run is queued or at shutdown
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int64_t, RunEntry> runs_ ABSL_GUARDED_BY(mu_);  // queued, running, or stopping
  std::set<QueueKey> queue_ ABSL_GUARDED_BY(mu_);
  std::map<AttemptKey, AttemptEntry> attempts_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, WorkerEntry> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_SCHEDULING_SCHEDULER_H_
