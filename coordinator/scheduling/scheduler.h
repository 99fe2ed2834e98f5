// Scheduler: the run queue with its attempt leases and fencing, the checkpoints that are its
// runs' resume points, and the worker registry it places runs on ("Owners" below).
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
// error note the fallback (shown by `xmodctl run show`) with an EVENT_CHECKPOINT_REJECTED event.
// Replies carry lease_ttl_ms so the worker can fence its trainers (worker/agent.h).
//
// Gangs (training.ranks_per_worker = P > 0 with ranks R > P): one attempt spans R / P
// workers, its members, each running P ranks; member 0 runs rank 0, serves the TCPStore on
// its advertised host and a port from its declared range, and alone reports metrics and
// checkpoints. No two open attempts share a rendezvous address: it is stored with the
// attempt (attempts.rendezvous), so a restart still holds the ports of running gangs, and a
// gang whose ready hosts have every port held is not placed (it waits, PendingReason says
// why, and it reserves workers as below) until an attempt holding one ends. Placement is all or
// nothing: the attempt is written once with every member (an attempt_members row each), the
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
// Sharing (docs/operations.md, "Sharing a cluster"): each run belongs to the user whose
// credential submitted its sweep. The policy scans the queue in share order (share_order.h:
// runs within their user's quota first, then by priority, then the user furthest below its
// weighted share, then FIFO); a run beyond its user's quota only borrows idle slots. Preempt(),
// called by the coordinator's ticker, orders running attempts to stop (preemption.h) so that
// higher-priority runs, or runs of users taking back borrowed slots, can start: the order is
// stored with the attempt (attempts.preempt_reason, an EVENT_RUN_PREEMPT_ORDERED event), sent as
// PREEMPT in every heartbeat reply to its members until the attempt ends, and the run's
// PREEMPTED FinishRun requeues it at once without counting a failure; it resumes from the
// checkpoint its trainer wrote on SIGTERM.
// Thread-safe.
//
// Owners (docs/architecture.md, "The scheduler's owners"), wired by coordinator.cc:
// - the run queue with its leases and fencing: this class. It owns the scheduling lock and,
//   under it, the live runs and open attempts (live_state.h) and the resume points
//   (checkpoints: a checkpoint moves the resume point a placement reads, so it is recorded
//   under the lock and kept in memory once stored). It decides with placement.h (the policy,
//   pure), grants with leases.h, moves ended attempts on with retry_policy.h and rolls a
//   failed commit back with pending_changes.h. Its methods are spread by concept over
//   scheduler.cc (commit, Acquire), run_queue.cc (user actions), attempt_end.cc (FinishRun,
//   lease expiry), heartbeats.cc (Register, Heartbeat), checkpoints.cc, rebuild.cc and
//   sharing.cc. Its SQL is in coordinator/store/.
// - the worker registry (worker_registry.h): registrations, liveness, epochs, free slots and
//   ports. A member of this class guarded by the same lock, because one placement reads and
//   takes from both.
// - metric ingest (metric_ingest.h): given to Create, not owned. Metric points are checked
//   against its own table of live attempts, which CommitLocked keeps in step, and stored
//   without the scheduling lock; it never calls back. Lock order: the scheduling lock, then
//   the ingest's.
// - the sharing policy (share_order.h, preemption.h): pure functions of the queue, the
//   attempts and the workers' room, called under the lock.
#ifndef XMOD_COORDINATOR_SCHEDULING_SCHEDULER_H_
#define XMOD_COORDINATOR_SCHEDULING_SCHEDULER_H_

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/scheduling/live_state.h"
#include "coordinator/scheduling/metric_ingest.h"
#include "coordinator/scheduling/pending_changes.h"
#include "coordinator/scheduling/placement.h"
#include "coordinator/scheduling/preemption.h"
#include "coordinator/scheduling/retry_policy.h"
#include "coordinator/scheduling/scheduler_options.h"
#include "coordinator/scheduling/share_order.h"
#include "coordinator/scheduling/worker_registry.h"
#include "coordinator/store/change_feed.h"
#include "coordinator/store/store.h"
#include "xmod/v1/coordinator.pb.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

class Scheduler {
 public:
  // Rebuilds the live state from `store` and opens the open attempts to `ingest`. `store`,
  // `clock`, `feed` and `ingest` must outlive the scheduler; `metrics` may be null.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(Store* store, Clock* clock,
                                                           ChangeFeed* feed,
                                                           CoordinatorMetrics* metrics,
                                                           MetricIngest* ingest,
                                                           const SchedulerOptions& options);

  // --- User actions -------------------------------------------------------------------
  // Whose work a caller may change is the API's to check (coordinator/api/ownership.h); here
  // `actor` is the credential that made the change, stored with its event ("" = anonymous;
  // nullopt: the coordinator acted on its own, e.g. an adaptive design).
  //
  // Stores a sweep submitted by credential `submitter` ("" = anonymous) and its expanded
  // runs in one transaction and queues the runs; fills in the run ids. Returns the sweep id.
  absl::StatusOr<int64_t> SubmitSweep(const xmod::v1::SweepSpec& spec,
                                      std::vector<xmod::v1::Run>* runs,
                                      const std::string& submitter = "");
  // Adds expanded `runs` to the existing sweep and queues them, in one transaction with
  // `also` (e.g. the design decision that proposed them; it sees the runs' ids); fills in
  // the run ids. FAILED_PRECONDITION when the sweep was cancelled, NOT_FOUND when it does
  // not exist; then nothing is stored.
  absl::Status AddRuns(int64_t sweep_id, std::vector<xmod::v1::Run>* runs, Store::WriteFn also,
                       const std::optional<std::string>& actor);
  // QUEUED -> CANCELLED at once; RUNNING -> CANCELLED with a STOP order to its worker.
  // Cancelling a cancelled run is a no-op; a SUCCEEDED or FAILED run is FAILED_PRECONDITION.
  // A non-empty `reason` (why it is not trained, e.g. "linked to run 4 of sweep 1") is kept
  // as the run's error and its event's text.
  absl::Status CancelRun(int64_t run_id, const std::optional<std::string>& actor,
                         const std::string& reason = "");
  // Early stopping (EarlyStopping): CancelRun, plus the run's censored_runs row (the live
  // Δ `live_delta` at `flops` and the reason) and an EVENT_RUN_STOPPED_EARLY event.
  absl::Status StopEarly(int64_t run_id, double flops, double live_delta,
                         const std::string& reason);
  // Cancels every queued or running run of the sweep and marks the sweep cancelled.
  absl::Status CancelSweep(int64_t sweep_id, const std::optional<std::string>& actor);
  // FAILED or CANCELLED -> QUEUED with a fresh allowance of attempts; the next attempt
  // resumes from the latest checkpoint. FAILED_PRECONDITION for other states.
  absl::Status ResumeRun(int64_t run_id, const std::optional<std::string>& actor);
  // ResumeRun for every FAILED run of a sweep, and an EVENT_SWEEP_RETRIED event; returns their ids.
  absl::StatusOr<std::vector<int64_t>> RetryFailed(int64_t sweep_id,
                                                   const std::optional<std::string>& actor);

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
  // One preemption pass (preemption.h): stores and applies the PREEMPT orders it decides;
  // returns how many. Called periodically by the coordinator.
  int Preempt();
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
  using AttemptKey = scheduling::AttemptKey;
  using Touched = scheduling::Touched;
  using Retry = scheduling::Retry;
  // What a heartbeat changes, gathered under the lock and applied once stored.
  struct HeartbeatWork {
    std::vector<Store::WriteFn> writes;
    std::vector<Touched> touched;
    std::vector<AttemptKey> renewed;  // leases to extend once the renewal is stored
    std::vector<std::pair<int64_t, xmod::v1::Progress>> progress_gauges;  // by run id
    std::set<AttemptKey> listed;  // the attempts the worker runs
    bool leaving = false;         // the worker drains (HeartbeatRequest.leaving)
  };
  // Why a run ended early, for its censored_runs row (StopEarly).
  struct Censoring {
    double flops = 0;
    double live_delta = 0;
    std::string reason;
  };

  Scheduler(Store* store, Clock* clock, ChangeFeed* feed, CoordinatorMetrics* metrics,
            MetricIngest* ingest, const SchedulerOptions& options);
  // Rebuilds memory from the database (rebuild.cc).
  absl::Status Rebuild();
  // After the rebuild: the runs' users and preemptible flags, the open attempts' PREEMPT
  // orders (started_ms = `mono`), and the stored preemption counts into the metrics.
  absl::Status RestoreSharing(int64_t mono, const std::map<std::string, int64_t>& counters);

  // --- Sharing (sharing.cc) -------------------------------------------------------------
  // Slots every user's open attempts hold, by kind.
  scheduling::SlotsByUser InUseLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The queue in share order for a poller with slots of `kind`.
  std::vector<scheduling::QueuedRun> ShareQueueLocked(xmod::v1::SlotKind kind) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The write of each member's slot kind and cores of a new attempt (usage accounting).
  Store::WriteFn SlotKindWriteLocked(const AttemptKey& key,
                                     const scheduling::AttemptEntry& attempt) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Current attempts of running runs, and the live workers' room, as preemption sees them.
  std::vector<scheduling::RunningAttempt> RunningLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::map<int64_t, scheduling::WorkerRoom> RoomsLocked(int64_t mono) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The policy (header comment; scheduling::PlanPlacement) for `poller` at monotonic `mono`:
  // the run to place, if any; applies the plan's pending reasons. `next_ready` gets the
  // earliest backoff end among runs not yet ready.
  std::optional<scheduling::Placement> PlanLocked(int64_t poller, int64_t mono, int64_t* next_ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts attempt `run.attempts + 1` of `placement` (memory, then one commit): the
  // assignments of its members, member 0's first. `arrived` is when the poller's request
  // arrived (monotonic).
  absl::StatusOr<std::vector<xmod::v1::Assignment>> LeaseLocked(
      const scheduling::Placement& placement, int64_t arrived, int64_t* sweep_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Acquire's wait, for the worker of `request` while it polls: until its part of a gang or
  // a run it was leased (into `assignment`, the runs started into `started`), `deadline`, or
  // shutdown. The error of a lease that could not be stored.
  absl::Status PollLocked(const xmod::v1::AcquireRunRequest& request, int64_t arrived,
                          absl::Time deadline, std::optional<xmod::v1::Assignment>* assignment,
                          std::vector<Touched>* started) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Commits `writes` as one transaction and waits, holding mu_. On success publishes the
  // change's side effects; on failure restores the saved memory and returns the error.
  // Attempts the change starts, ends or cancels are told to the ingest (metric_ingest.h).
  absl::Status CommitLocked(std::vector<Store::WriteFn> writes,
                            const scheduling::PendingChanges& change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attempts `change` ends: open before it, gone from memory now.
  std::vector<AttemptKey> EndingLocked(const scheduling::PendingChanges& change) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After `change` is stored: the attempts it started opened to ingest_, and the running runs
  // it cancelled marked.
  void OpenToIngestLocked(const scheduling::PendingChanges& change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Ends the open attempt `key` with `outcome` and moves its run on by `retry`: requeue,
  // FAILED, or leave a cancelled run alone. Saves what it changes into `change` and appends
  // the database writes to `writes`. `now` is the wall clock, `mono` the monotonic one.
  void EndAttemptLocked(const AttemptKey& key, const std::string& outcome, Retry retry,
                        int exit_code, const std::string& error, int64_t now, int64_t mono,
                        std::vector<Store::WriteFn>* writes, std::vector<Touched>* touched,
                        scheduling::PendingChanges* change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FinishRun of a member of open attempt `key`: the outcome stored, its retry and error
  // (a success with metric points missing is a retryable failure).
  Retry FinishRetryLocked(const xmod::v1::FinishRunRequest& request, const AttemptKey& key,
                          size_t member, std::string* outcome, std::string* error,
                          scheduling::PendingChanges* change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The open attempts whose lease lapsed at monotonic `mono`, each with why.
  std::vector<std::pair<AttemptKey, std::string>> LapsedLocked(int64_t mono) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnqueueLocked(int64_t run_id, scheduling::RunEntry& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues runs just stored for `sweep_id`, submitted by `user`, and tells watchers.
  void QueueStored(int64_t sweep_id, const std::vector<xmod::v1::Run>& runs,
                   const std::string& user);
  // CancelRun by `actor` for `reason`, or StopEarly (no actor) with `censoring`.
  absl::Status EndRunByUser(int64_t run_id, std::optional<Censoring> censoring,
                            const std::optional<std::string>& actor, const std::string& reason);
  // Requeues a terminal run loaded from the database (ResumeRun / RetryFailed) for `user`,
  // at the request of `actor`.
  absl::Status Requeue(const xmod::v1::Run& run,
                       std::optional<scheduling::ResumeCheckpoint> checkpoint,
                       const std::string& user, bool preemptible,
                       const std::optional<std::string>& actor);

  // Heartbeat: renews the leases of the listed attempts the worker still holds, orders
  // KILL for the others and STOP for cancelled runs, and notes member 0's progress.
  void RenewListedLocked(const xmod::v1::HeartbeatRequest& request, int64_t now,
                         HeartbeatWork* work, xmod::v1::HeartbeatResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a re-registration of `worker_id`, the attempts begun earlier that it no longer
  // lists (ended with the worker's previous life).
  std::vector<AttemptKey> OrphanedLocked(int64_t worker_id,
                                         const std::set<AttemptKey>& listed) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The renewals, liveness and progress gauges of a heartbeat, taking effect now (before its
  // rows are stored: see Heartbeat).
  void ApplyHeartbeatLocked(int64_t worker_id, int64_t mono, const HeartbeatWork& work)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ReportCheckpoint's path: inside the run's CheckpointDir, lexically always, and on the
  // file system (no symlink out of it, a regular file of the reported bytes) where this
  // machine sees the folder (common/confined_path.h). INVALID_ARGUMENT naming `path`.
  absl::Status CheckReportedPath(const xmod::v1::ReportCheckpointRequest& request);
  // FAILED_PRECONDITION unless `request`'s attempt is its run's current one, held by the
  // reporting worker (its gang's member 0).
  absl::Status CheckCurrentLocked(const xmod::v1::ReportCheckpointRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A refused resume candidate: forgets it and notes the fallback on the attempt; the
  // run's checkpoints left go to `remaining`.
  std::future<absl::Status> RejectCheckpointLocked(
      const xmod::v1::ReportCheckpointRequest& request, int64_t now,
      std::shared_ptr<std::vector<xmod::v1::Checkpoint>> remaining)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new checkpoint of the current attempt: records it, keeping the two newest.
  std::future<absl::Status> RecordCheckpointLocked(const xmod::v1::ReportCheckpointRequest& request,
                                                   int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // <checkpoint_root>/sweep-<S>/run-<R>: the folder of a run's checkpoints (RunSpec
  // checkpoint_dir), the only place ReportCheckpoint accepts them from.
  std::string CheckpointDir(int64_t sweep_id, int64_t run_id) const;
  // Queues `writes` as one closure (one transaction) and returns its future; in the store's
  // bulk lane, behind the metric batches queued before it, when `bulk_lane`.
  std::future<absl::Status> Submit(std::vector<Store::WriteFn> writes, bool bulk_lane = false);
  void Publish(const std::vector<Touched>& touched);

  Store* const store_;
  Clock* const clock_;
  ChangeFeed* const feed_;
  CoordinatorMetrics* const metrics_;
  const SchedulerOptions options_;

  absl::Mutex mu_;
  absl::CondVar queue_changed_;  // signalled when a run is queued or at shutdown
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  scheduling::LiveState live_ ABSL_GUARDED_BY(mu_);
  scheduling::WorkerRegistry workers_ ABSL_GUARDED_BY(mu_);
  MetricIngest* const ingest_;  // its own lock, taken after mu_
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_SCHEDULING_SCHEDULER_H_
