// GpuMonitor: the worker's GPU telemetry over time (docs/operations.md, "Monitoring"). A
// thread samples NVML (gpu_telemetry.h) every `interval` and
//   - sets each GPU's gauges on the worker's /metrics, labelled gpu="<index>" and name:
//       xmod_worker_gpu_utilization_ratio      busy fraction of NVML's last sample period
//       xmod_worker_gpu_memory_used_bytes      device memory in use
//       xmod_worker_gpu_memory_total_bytes     device memory
//       xmod_worker_gpu_power_watts            board power draw (absent where not reported)
//       xmod_worker_gpu_temperature_celsius    GPU core temperature
//   - keeps, for each attempt it tracks, the peak device memory it held on any one of its GPUs
//     (what decides whether it fits): on each GPU the memory NVML lists for its processes, or,
//     where NVML lists none of them there (a process in another PID namespace, a rank whose
//     pid is not tracked, a driver that does not list processes), the memory in use on that
//     GPU (an upper bound). The agent reports it with the attempt's FinishRun
//     (peak_gpu_memory_bytes).
// A failed sample is logged (the first of a run of failures) and retried next interval.
//
// Thread-safety: all public methods are thread-safe; mu_ is never held during a sample.
#ifndef XMOD_WORKER_GPU_MONITOR_H_
#define XMOD_WORKER_GPU_MONITOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "worker/gpu_telemetry.h"
#include "worker/metric_relay.h"

namespace xmod {

class GpuMonitor {
 public:
  // Registers the gauge families on `registry` (which must outlive the monitor). Starts
  // sampling every `interval` when `interval` > 0; with 0, only SampleOnce() samples (tests).
  GpuMonitor(std::unique_ptr<GpuTelemetry> telemetry, prometheus::Registry& registry,
             absl::Duration interval);
  // Stops the thread.
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  // Follows attempt `key` running as `pids` on the GPUs of NVML indices `gpus`.
  void Track(AttemptKey key, std::vector<int> gpus, std::vector<int> pids);
  // Stops following it: the peak device memory any sample saw it hold (0 when none did).
  int64_t Untrack(AttemptKey key);

  // One sample: gauges and peaks. The telemetry's error when it fails.
  absl::Status SampleOnce();

 private:
  struct Tracked {
    std::vector<int> gpus;
    std::vector<int> pids;
    int64_t peak_bytes = 0;
  };
  struct Gauges {
    prometheus::Gauge* utilization;
    prometheus::Gauge* memory_used;
    prometheus::Gauge* memory_total;
    prometheus::Gauge* power;  // null until a power reading arrives
    prometheus::Gauge* temperature;
  };
  void Loop(absl::Duration interval);
  void SetGauges(const GpuReading& reading);
  // What `tracked` holds now in `readings` (header comment).
  static int64_t HeldBy(const Tracked& tracked, const std::vector<GpuReading>& readings);

  const std::unique_ptr<GpuTelemetry> telemetry_;
  prometheus::Family<prometheus::Gauge>& utilization_;
  prometheus::Family<prometheus::Gauge>& memory_used_;
  prometheus::Family<prometheus::Gauge>& memory_total_;
  prometheus::Family<prometheus::Gauge>& power_;
  prometheus::Family<prometheus::Gauge>& temperature_;

  absl::Mutex mu_;
  std::map<AttemptKey, Tracked> tracked_ ABSL_GUARDED_BY(mu_);
  std::map<int, Gauges> gauges_ ABSL_GUARDED_BY(mu_);  // by GPU index
  bool failing_ ABSL_GUARDED_BY(mu_) = false;          // the last sample failed (logged)

  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace xmod

#endif  // XMOD_WORKER_GPU_MONITOR_H_
