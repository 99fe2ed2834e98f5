// A simulated xmod-worker for the load benchmark: speaks the WorkerGateway protocol
// (proto/xmod/v1/worker.proto) exactly as xmod-worker does, without training anything.
// It registers one CPU slot, heartbeats every `heartbeat_ms` on its own thread (the running
// attempt in the request, as a real worker sends it), and on a second thread acquires a run,
// "trains" it for `run_ms` by reporting metric points in consecutive batches, finishes it
// as SUCCEEDED once every point is acknowledged, and acquires the next.
//
// What it measures goes into the shared LoadStats of the current phase: heartbeat round
// trips, the hand-off time (FinishRun sent until AcquireRun returned the next run on the
// freed slot) and the points acknowledged (durable on the coordinator).
//
// Thread-safety: Start/Stop from one thread; LoadStats is shared and locked.
#ifndef XMOD_BENCH_LOAD_SIM_WORKER_H_
#define XMOD_BENCH_LOAD_SIM_WORKER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/channel.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod::bench {

// How the simulated workers report metrics in one phase of the benchmark.
struct LoadPhase {
  std::string name;
  int points_per_report = 20;
  // Pause between reports of one worker; 0 = the next report as soon as the last is
  // acknowledged (closed loop, as many points as the coordinator takes).
  int report_interval_ms = 1000;
};

// Measurements of one phase, filled by every worker.
struct LoadStats {
  absl::Mutex mu;
  std::vector<double> heartbeat_ms ABSL_GUARDED_BY(mu);
  std::vector<double> handoff_ms ABSL_GUARDED_BY(mu);
  std::atomic<int64_t> points_acked{0};
  std::atomic<int64_t> runs_finished{0};
  std::atomic<int64_t> rpc_errors{0};
};

// The phase the workers are in: what they do and where their measurements go. Swapped by
// the benchmark between phases; workers read it at every step.
struct PhaseSlot {
  std::atomic<const LoadPhase*> phase{nullptr};
  std::atomic<LoadStats*> stats{nullptr};
};

struct SimWorkerOptions {
  std::string name;
  int heartbeat_ms = 1000;
  int run_ms = 6000;
  int first_heartbeat_delay_ms = 0;  // spreads the workers' heartbeats over the period
};

class SimWorker {
 public:
  SimWorker(std::shared_ptr<grpc::Channel> channel, SimWorkerOptions options,
            const PhaseSlot* slot);
  ~SimWorker();  // Stop()s

  // Registers (synchronously, so that every worker is known before the load starts) and
  // starts both threads. False if Register failed.
  bool Start();
  // Tells both threads to end, without waiting; calls in flight finish first.
  void RequestStop();
  // RequestStop()s and joins both threads; the current run is abandoned (its lease lapses
  // on the coordinator).
  void Stop();

 private:
  void HeartbeatLoop();
  void RunLoop();
  // Reports points until the run's time is up; false if stopped or the attempt went stale.
  bool TrainRun(int64_t run_id, int attempt, int64_t* last_seq);

  std::unique_ptr<v1::WorkerGateway::Stub> stub_;
  const SimWorkerOptions options_;
  const PhaseSlot* slot_;
  int64_t worker_id_ = 0;
  absl::Notification stop_;
  absl::Mutex mu_;
  int64_t running_run_ ABSL_GUARDED_BY(mu_) = 0;  // 0 = idle
  int running_attempt_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread heartbeat_thread_;
  std::thread run_thread_;
};

}  // namespace xmod::bench

#endif  // XMOD_BENCH_LOAD_SIM_WORKER_H_
