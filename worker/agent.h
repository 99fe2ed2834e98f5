// Agent: the worker's control loop (docs/design.md, "Processes" and "Scheduling and faults").
//
//   Register ──▶ heartbeat thread: renews the leases of every attempt it holds, extends each
//   │            child's lease deadline, applies STOP / PREEMPT / KILL orders, re-registers
//   │            when told to, escalates SIGTERM to SIGKILL after the grace period, and
//   │            SIGKILLs children whose lease it could not renew in time (on the Clock)
//   ├──▶ acquire thread: long-polls AcquireRun with the free slots; per assignment writes
//   │    <work_dir>/run-<id>-a<attempt>/spec.pb and starts one xmod-train child per rank
//   │    (the launch plan, launch_plan.h)
//   │    (training.ranks = W, one slot each; W > 1: --rank r --world_size W --rendezvous
//   │    <that folder>/rdzv, supervised as one RankGroup, see rank_group.h). A gang's part
//   │    (Assignment.gang) runs ranks_per_worker ranks, rank_offset + r of world_size, with
//   │    --rendezvous tcp://HOST:PORT (member 0's rank 0 serves it) and --dist_host the
//   │    worker's advertised address; only global rank 0 writes events.
//   ├──▶ one supervisor thread per attempt: reads its TrainerEvents into the MetricRelay,
//   │    waits for it to exit, waits until its points are acknowledged, then hands its
//   │    FinishRun to the relay, which sends it last
//   └──▶ relay thread: MetricRelay::RunPumpLoop
//
// Drain (SIGTERM to the worker): stop acquiring, SIGTERM every child (which checkpoints and
// exits 75), report each attempt PREEMPTED, then Wait() returns. Bounded: once every child
// has exited (within kill_grace_ms), the reports get drain_timeout_ms to reach the
// coordinator; whatever is still undelivered then (points, checkpoint reports, FinishRun) is
// kept in the spill folder (MetricRelay::Keep) and replayed by the worker's next start, whose
// heartbeats list those attempts until their FinishRun arrives (or until the coordinator has
// answered their reports only with errors for 3 lease TTLs: then it may end them as lost,
// MetricRelay::attempts_to_hold). Wait() returns within
// max(acquire_wait_ms + an RPC, kill_grace_ms + a heartbeat interval + an RPC) +
// drain_timeout_ms + the RPCs then in flight (docs/fault-tolerance.md).
//
// Fencing (the trainer's side is model/train/lease.h). A lease granted or renewed by a reply
// stays valid at least lease_ttl_ms (from the reply, else from Register) after its request
// was sent, so the agent reads the Clock's monotonic time before each AcquireRun and
// Heartbeat and, on success, gives each child the deadline sent + ttl - margin (margin =
// min(1 s, ttl / 10)): at start with --lease_deadline_ms, later as TrainerControl messages on
// the control channel (--lease_fd). The child enforces it itself, so a frozen or dead worker
// cannot let it write past its lease. Should the agent itself see a deadline pass (heartbeats
// failing past the TTL), it SIGKILLs the child. An attempt the coordinator no longer
// considers current (a KILL order, a stale reply) is SIGKILLed at once, never SIGTERMed: it
// must not write another checkpoint; so is one whose metric report the coordinator refused
// for good (nothing more it reports could be stored; reported FAILED with the refusal, see
// metric_relay.h). A child that exits with kExitLeaseExpired is reported
// PREEMPTED (requeued, not a failure).
//
// Resume and checkpoint garbage collection: the child gets --resume/--resume_sha256/
// --resume_bytes for the assignment's resume point and each fallback, newest first; a
// candidate without a recorded digest is left out (the others keep theirs), and a candidate
// the child refuses is reported with ReportCheckpoint{rejected}. Checkpoint files are deleted
// only here, only direct children of the run's checkpoint folder (spec.checkpoint_dir),
// unlinked relative to the folder opened without following a symlink (unlinkat: a recorded
// path elsewhere, a folder that is a symlink, or a component swapped for a symlink meanwhile
// never makes it delete outside the folder), and only checkpoints the
// coordinator holds: once a checkpoint of the attempt is acknowledged (durable), every known
// checkpoint of the run (the assignment's candidates and the attempt's acknowledged ones)
// older than the two newest good ones is deleted with its sidecar. The trainer never deletes
// anything.
// Liveness: a child that makes no step progress (no started event, no progress, metric or
// checkpoint event at a later step) for stall_timeout_ms of the Clock's monotonic time is
// SIGKILLed and its attempt reported FAILED with the reason (retried by the coordinator):
// heartbeats keep an attempt's lease only while its trainer moves. The check lives here, next
// to the event stream it watches, and runs on the heartbeat thread.
// Nothing lost: FinishRun carries last_seq, the seq of the last metric point the child
// produced, so the coordinator can tell whether every point is durable.
// Outcome of an attempt (the table in trainer_contract/outcome.h): an order or drain decides
// it (CANCELLED / PREEMPTED) unless the child still finished its budget; otherwise exit 0 is
// SUCCEEDED and anything else FAILED with the exit code and the last ~4 KB of the child's
// stderr (for a multi-rank attempt: the first failing rank's, after the other ranks were
// killed).
//
// Thread-safety: all public methods are thread-safe.
#ifndef XMOD_WORKER_AGENT_H_
#define XMOD_WORKER_AGENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "worker/device_discovery.h"
#include "worker/gateway_client.h"
#include "worker/gpu_monitor.h"
#include "worker/launch_plan.h"
#include "worker/metric_relay.h"
#include "worker/process_supervisor.h"
#include "worker/worker_metrics.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

struct AgentOptions {
  std::string worker_name;  // stable per machine
  std::string hostname;
  std::string work_dir;   // per-attempt folders: spec, train.log
  std::string train_bin;  // the xmod-train executable
  std::string version = "0.1.0";
  // Gangs (RegisterRequest): the address other workers reach this one's ranks at ("" = the
  // one the coordinator sees) and the ports a gang's TCPStore may take here (0 = none).
  std::string advertise_host;
  int32_t rendezvous_port_first = 0;
  int32_t rendezvous_port_last = 0;
  int64_t acquire_wait_ms = 5'000;  // AcquireRun long-poll bound
  int64_t kill_grace_ms = 60'000;   // SIGTERM → SIGKILL (Clock time)
  // No step progress this long (monotonic): SIGKILL, attempt FAILED and retried. 0 = never.
  int64_t stall_timeout_ms = 900'000;
  // KEY=VALUE pairs added to every trainer's environment, after the thread budget.
  std::vector<std::pair<std::string, std::string>> train_env;
  int64_t retry_delay_ms = 1'000;  // pause after a failed Register/AcquireRun
  // A drain delivers the reports of its stopped trainers for at most this long (Clock),
  // then keeps the rest for the next start.
  int64_t drain_timeout_ms = 30'000;
  int events_fd = 3;         // descriptor number of the event pipe in the child
  int control_fd = 4;        // descriptor number of the lease control channel
  MetricRelayOptions relay;  // spill_dir "" = <work_dir>/spill
  // GPU telemetry: measures each attempt on CUDA slots (its peak memory goes into its
  // FinishRun). Null: none (no GPU, no NVML). Must outlive the agent.
  GpuMonitor* gpu_monitor = nullptr;
};

class Agent {
 public:
  // Every pointer must outlive the agent; `metrics` may be null.
  Agent(AgentOptions options, GatewayClient* gateway, ProcessLauncher* launcher, DeviceProbe* probe,
        Clock* clock, WorkerMetrics* metrics = nullptr);
  // Drains, keeps undelivered reports for the next start and joins every thread.
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Probes the slots (once) and registers, retrying every retry_delay_ms until it succeeds
  // or Drain() is called (then CANCELLED). Errors from the probe are returned as they are.
  absl::Status Register();
  // Starts the heartbeat, acquire and relay threads. Call after Register().
  void Start();
  // Stops acquiring and preempts every child. Returns at once.
  void Drain();
  // Stops waiting for undelivered reports, which Wait() then keeps for the next start (a
  // second signal, or the drain timeout).
  void Abandon();
  // Blocks until Drain() was called, every attempt has ended, and its reports were
  // delivered or (past drain_timeout_ms, or abandoned) kept in the spill folder; then, unless
  // abandoned, sends a last heartbeat that says the worker leaves.
  void Wait();

  // The loops' single steps, public for tests.
  absl::Status HeartbeatOnce();
  // One AcquireRun with the free slots; true when a child was started.
  absl::StatusOr<bool> AcquireOnce();
  // SIGKILLs children whose SIGTERM grace period has passed.
  void EnforceGrace();
  // SIGKILLs children whose lease deadline has passed without a renewal.
  void EnforceLeases();
  // SIGKILLs children that made no step progress for stall_timeout_ms.
  void EnforceStallTimeout();

  // Inspection.
  int64_t worker_id() const;
  std::vector<int32_t> FreeSlots() const;
  size_t running_attempts() const;
  const std::vector<v1::Slot>& slots() const { return slots_; }
  MetricRelay& relay() { return relay_; }

 private:
  struct Attempt {
    AttemptKey key;
    v1::Assignment assignment;
    std::unique_ptr<ChildProcess> child;
    std::vector<int32_t> slots;
    v1::Progress progress;
    v1::Outcome stop_outcome = v1::OUTCOME_UNSPECIFIED;  // set by an order, drain or staleness
    std::string stop_reason;                             // why, when the agent killed it
    int64_t kill_at_ms = 0;                              // SIGKILL deadline once SIGTERMed
    bool killed = false;
    bool exited = false;            // the child was reaped
    int64_t lease_deadline_ms = 0;  // monotonic; the child stops by then unless extended
    int64_t last_step = -1;         // furthest step seen in the child's events
    int64_t progress_ms = 0;        // monotonic time the child last moved (or started)
    // Its rank 0 writes events (false on gang members other than 0, whose liveness is
    // rank 0's: a stalled peer stalls it too).
    bool has_events = true;
    // Checkpoint reports handed to the relay, in order (acknowledged ones first), and the
    // checkpoint files already deleted. Supervise thread only.
    std::vector<v1::ReportCheckpointRequest> reports;
    std::vector<std::string> deleted;
    std::string checkpoint_dir;  // the spec's: the only folder its checkpoints may be in
    std::thread thread;
  };

  absl::Status RegisterOnce();
  // Reserves the slots, writes the spec and starts the children of the launch plan, whose
  // lease lapses at `lease_deadline_ms` (monotonic); reports PREEMPTED (no slots, draining)
  // or FAILED (could not start) itself when that is impossible (agent_start.cc).
  void StartAttempt(const v1::Assignment& assignment, int64_t lease_deadline_ms);
  // Has the GPU monitor (if any) follow attempt `key`, running as `pid` on `slots`, when
  // they are CUDA slots.
  void TrackGpus(AttemptKey key, const std::vector<int32_t>& slots, int pid);
  // Marks busy the slots of the assignment's ranks: the assigned ones that are free here,
  // topped up with other free slots. An error, reserving nothing, when the worker drains or
  // has too few free.
  absl::StatusOr<std::vector<int32_t>> ReserveSlots(const v1::Assignment& assignment);
  // The child deadline of a lease granted or renewed by a request sent at `sent_ms`.
  int64_t LeaseDeadline(int64_t sent_ms, int64_t ttl_ms) const;
  // HeartbeatOnce's steps: the attempts held now (with those whose reports still hold a
  // lease), a STOP, PREEMPT or KILL order carried out, and the listed attempts' leases
  // extended to `deadline`.
  v1::HeartbeatRequest HeartbeatRequestNow();
  // The heartbeat Wait() ends with: leaving, its reply not acted on.
  void SayLeaving();
  void ApplyOrderLocked(const v1::Order& order) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RenewLeasesLocked(const v1::HeartbeatRequest& request, int64_t deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One child for one rank; a RankGroup of W children for W > 1 ranks (rank r = ranks[r]);
  // if a rank cannot start, those already started are killed.
  absl::StatusOr<std::unique_ptr<ChildProcess>> StartRanks(const std::vector<RankLaunch>& ranks);
  // Holds the started attempt and starts its supervisor thread.
  void AddAttempt(const v1::Assignment& assignment, const LaunchPlan& plan,
                  std::unique_ptr<ChildProcess> child, std::vector<int32_t> slots,
                  int64_t lease_deadline_ms);
  // The supervisor thread (agent_supervise.cc): relays the events until the child exits,
  // decides the outcome, waits for its reports to be delivered and ends the attempt.
  void Supervise(Attempt* attempt);
  // Reads and relays the child's events to their end; whether one was `finished`.
  bool RelayEvents(Attempt* attempt);
  // Notes the step an event shows the child at (for the stall timeout).
  void NoteProgress(Attempt* attempt, const v1::TrainerEvent& event);
  void RelayEvent(Attempt* attempt, const v1::TrainerEvent& event);
  // The FinishRun of an exited child, by the outcome rule (trainer_contract/outcome.h).
  v1::FinishRunRequest FinishRequest(Attempt* attempt, const ExitStatus& exit, bool finished_event);
  // Forgets the attempt and frees its slots; its thread is joined later.
  void EndAttempt(AttemptKey key);
  // Sends SIGTERM once and arms the grace period.
  void StopLocked(Attempt& attempt, v1::Outcome outcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends SIGKILL once: the attempt must not write anything more.
  void KillLocked(Attempt& attempt, v1::Outcome outcome, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Relays a checkpoint (or a refused resume candidate) and deletes the checkpoint files the
  // coordinator no longer needs (see the header comment). Supervise thread only.
  void RelayCheckpoint(Attempt* attempt, v1::ReportCheckpointRequest request);
  void CollectCheckpoints(Attempt* attempt, bool all_delivered);
  // The relay stopped relaying `key`: stale (`refusal` empty) or its metrics refused.
  void OnStale(AttemptKey key, const std::string& refusal);
  void UpdateSlotGaugesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void JoinFinishedThreads();
  void HeartbeatLoop();
  void AcquireLoop();

  const AgentOptions options_;
  GatewayClient* const gateway_;
  ProcessLauncher* const launcher_;
  DeviceProbe* const probe_;
  Clock* const clock_;
  WorkerMetrics* const metrics_;
  MetricRelay relay_;
  std::vector<v1::Slot> slots_;  // set once by Register()

  mutable absl::Mutex mu_;
  int64_t worker_id_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t heartbeat_interval_ms_ ABSL_GUARDED_BY(mu_) = 2'000;
  int64_t lease_ttl_ms_ ABSL_GUARDED_BY(mu_) = 30'000;  // from Register
  std::map<AttemptKey, std::unique_ptr<Attempt>> attempts_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> busy_ ABSL_GUARDED_BY(mu_);  // by slot index
  std::vector<std::thread> finished_threads_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;

  absl::Notification drain_;     // Drain() was called
  absl::Notification abandon_;   // Abandon() was called
  absl::Notification shutdown_;  // everything ended: heartbeat and relay threads stop
  std::thread heartbeat_thread_;
  std::thread acquire_thread_;
  std::thread relay_thread_;
};

}  // namespace xmod

#endif  // XMOD_WORKER_AGENT_H_
