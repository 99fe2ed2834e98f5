// GPU telemetry from NVML (docs/operations.md, "Monitoring"): per GPU its utilisation, memory
// used and total, power and temperature, and the memory each compute process holds on it.
// NVML is libnvidia-ml.so.1, which the NVIDIA driver installs; it is loaded at run time
// (dlopen), never linked, so a worker on a machine without a driver needs nothing and simply
// has no GPU telemetry. Only the handful of entry points below are looked up, by name, with
// the C declarations NVML documents for them (nvml.h is not needed to build).
//
// Thread-safety: Sample() may be called from any thread (NVML is thread-safe); a
// GpuTelemetry is immutable after Load.
#ifndef XMOD_WORKER_GPU_TELEMETRY_H_
#define XMOD_WORKER_GPU_TELEMETRY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xmod {

// One GPU at one moment.
struct GpuReading {
  int index = 0;           // NVML's index, as nvidia-smi and CUDA_VISIBLE_DEVICES number GPUs
  std::string name;        // "NVIDIA H200"
  double utilization = 0;  // busy fraction of the last sample period, 0..1
  int64_t memory_used_bytes = 0;
  int64_t memory_total_bytes = 0;
  double power_watts = 0;  // -1: not reported by this GPU
  double temperature_celsius = 0;
  // Compute processes and the device memory each holds (empty when NVML lists none, e.g. a
  // process in another PID namespace).
  struct Process {
    int pid = 0;
    int64_t memory_bytes = 0;
  };
  std::vector<Process> processes;
};

class GpuTelemetry {
 public:
  // The library NVML is loaded from by default.
  static constexpr char kDefaultLibrary[] = "libnvidia-ml.so.1";

  // Loads NVML from `library` (a name the dynamic loader resolves, or a path) and initialises
  // it. UNAVAILABLE naming the library when it cannot be loaded (no driver: no telemetry) or
  // lacks an entry point; INTERNAL with NVML's message when it does not initialise.
  static absl::StatusOr<std::unique_ptr<GpuTelemetry>> Load(const std::string& library);
  // Shuts NVML down and unloads it.
  ~GpuTelemetry();
  GpuTelemetry(const GpuTelemetry&) = delete;
  GpuTelemetry& operator=(const GpuTelemetry&) = delete;

  // Every GPU NVML sees, by index. A reading NVML does not support for a GPU (power on some
  // boards) is -1; an error of a whole GPU is INTERNAL with NVML's message.
  absl::StatusOr<std::vector<GpuReading>> Sample() const;

 private:
  struct Api;  // the entry points (gpu_telemetry.cc)
  GpuTelemetry(void* handle, std::unique_ptr<Api> api);

  void* handle_;  // dlopen's
  std::unique_ptr<Api> api_;
};

}  // namespace xmod

#endif  // XMOD_WORKER_GPU_TELEMETRY_H_
