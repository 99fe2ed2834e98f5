// Agent: the worker's control loop (ARCHITECTURE.md, "Processes" and "Scheduling and faults").
//
//   Register ──▶ heartbeat thread: renews the leases of every attempt it holds, applies
//   │            STOP / PREEMPT orders, re-registers when told to, escalates SIGTERM to
//   │            SIGKILL after the grace period (on the injected Clock)
//   ├──▶ acquire thread: long-polls AcquireRun with the free slots; per assignment writes
//   │    <work_dir>/run-<id>-a<attempt>/spec.pb and starts one xmod-train child per rank
//   │    (training.ranks = W, one slot each; W > 1: --rank r --world_size W --rendezvous
//   │    <that folder>/rdzv, supervised as one RankGroup, see rank_group.h)
//   ├──▶ one supervisor thread per attempt: reads its TrainerEvents into the MetricRelay,
//   │    waits for it to exit, waits until its points are acknowledged, then FinishRun
//   └──▶ relay thread: MetricRelay::RunPumpLoop
//
// Drain (SIGTERM to the worker): stop acquiring, SIGTERM every child (which checkpoints and
// exits 75), report each attempt PREEMPTED, then Wait() returns.
// Outcome of an attempt: an order or drain decides it (CANCELLED / PREEMPTED) unless the
// child still finished its budget; otherwise exit 0 is SUCCEEDED and anything else FAILED
// with the exit code and the last ~4 KB of the child's stderr (for a multi-rank attempt:
// the first failing rank's, after the other ranks were killed).
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
  int64_t acquire_wait_ms = 5'000;  // AcquireRun long-poll bound
  int64_t kill_grace_ms = 60'000;   // SIGTERM → SIGKILL (Clock time)
  int64_t retry_delay_ms = 1'000;   // pause after a failed Register/AcquireRun/FinishRun
  int events_fd = 3;                // descriptor number of the event pipe in the child
  MetricRelayOptions relay;
};

class Agent {
 public:
  // Every pointer must outlive the agent; `metrics` may be null.
  Agent(AgentOptions options, GatewayClient* gateway, ProcessLauncher* launcher, DeviceProbe* probe,
        Clock* clock, WorkerMetrics* metrics = nullptr);
  // Drains, abandons undelivered reports and joins every thread.
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
  // Gives up on undelivered metrics and unfinished FinishRun retries (a second signal).
  void Abandon();
  // Blocks until Drain() was called and every attempt has ended and been reported.
  void Wait();

  // The loops' single steps, public for tests.
  absl::Status HeartbeatOnce();
  // One AcquireRun with the free slots; true when a child was started.
  absl::StatusOr<bool> AcquireOnce();
  // SIGKILLs children whose SIGTERM grace period has passed.
  void EnforceGrace();

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
    int64_t kill_at_ms = 0;                              // SIGKILL deadline once SIGTERMed
    bool killed = false;
    std::thread thread;
  };

  absl::Status RegisterOnce();
  // Writes the spec and starts the child; reports FAILED itself when that is impossible.
  void StartAttempt(const v1::Assignment& assignment);
  // One child for one launch; a RankGroup of W children for W > 1 launches (rank r =
  // launches[r]); if a rank cannot start, those already started are killed.
  absl::StatusOr<std::unique_ptr<ChildProcess>> StartRanks(
      const std::vector<LaunchOptions>& launches);
  void Supervise(Attempt* attempt);
  // Sends SIGTERM once and arms the grace period.
  void StopLocked(Attempt& attempt, v1::Outcome outcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FinishRun, retried until accepted, refused for good, or abandoned.
  void Finish(const v1::FinishRunRequest& request);
  void OnStale(AttemptKey key);
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
