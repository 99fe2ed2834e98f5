// Device discovery: the slots a worker offers the coordinator (docs/design.md, "Processes").
// One slot per CUDA GPU when `nvidia-smi` lists any (no CUDA library is linked: the tool's
// CSV output is parsed), otherwise CPU slots that split the machine's cores. Behind the
// DeviceProbe interface so that tests can hand a worker any set of slots.
//
// Inside a Slurm job (SLURM_JOB_ID set) the worker offers what the job was allocated on this
// node, not the whole machine: the allocation's CPUs replace the machine's cores, and only
// the allocated GPUs become slots (none when the job holds no GPU, even if nvidia-smi lists
// some). --cores_per_slot and --gpus=false still override (docs/operations.md, "Growing past
// one machine", step 3).
//
// Thread-safety: probes are immutable after construction; Probe() may be called from any
// thread.
#ifndef XMOD_WORKER_DEVICE_DISCOVERY_H_
#define XMOD_WORKER_DEVICE_DISCOVERY_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

class DeviceProbe {
 public:
  virtual ~DeviceProbe() = default;
  // The slots of this machine, indexed 0..n-1. An error when nothing usable was found.
  virtual absl::StatusOr<std::vector<v1::Slot>> Probe() = 0;
};

// Reads one environment variable: its value, or nullopt when it is unset.
using EnvironmentLookup = std::function<std::optional<std::string>(const char* name)>;

// The process's own environment (getenv).
std::optional<std::string> ProcessEnvironment(const char* name);

// What a Slurm job was allocated on this node, as Slurm's environment states it.
struct SlurmAllocation {
  std::string job_id;     // SLURM_JOB_ID
  int cpus = 0;           // SLURM_CPUS_ON_NODE, else SLURM_JOB_CPUS_PER_NODE's first count;
                          // 0 when neither is set
  std::vector<int> gpus;  // the node's GPU indices (empty: no GPU allocated)
  std::string gpus_from;  // the variable `gpus` was read from ("" when none)
};

// The allocation when SLURM_JOB_ID is set, nullopt outside Slurm. GPUs come from the first of
// SLURM_STEP_GPUS (inside an srun step), SLURM_JOB_GPUS (the batch step) and
// CUDA_VISIBLE_DEVICES that is set: comma-separated indices. A malformed value is
// INVALID_ARGUMENT naming the variable.
absl::StatusOr<std::optional<SlurmAllocation>> ReadSlurmAllocation(const EnvironmentLookup& env);

// The GPUs of `listed` (as nvidia-smi lists them) that `allocation` holds, renumbered as slots
// 0..n-1. When nvidia-smi lists exactly as many GPUs as were allocated, the job sees only its
// own (Slurm's device constraint) and all of them are kept; otherwise those whose index is
// allocated. An allocated GPU that nvidia-smi does not list is FAILED_PRECONDITION.
absl::StatusOr<std::vector<v1::Slot>> SelectAllocatedGpus(std::vector<v1::Slot> listed,
                                                          const SlurmAllocation& allocation);

struct SystemProbeOptions {
  int cpu_slots = 1;       // CPU slots when there is no GPU
  int cores_per_slot = 0;  // 0 = the machine's cores divided evenly among the CPU slots
  bool use_gpus = true;    // false: CPU slots even on a GPU machine
  // Command whose CSV output lists the GPUs; failing or printing nothing means "no GPU".
  std::string nvidia_smi_command =
      "nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits 2>/dev/null";
  // Where SLURM_* variables are read from; tests substitute a fixed map.
  EnvironmentLookup environment = ProcessEnvironment;
};

// The real probe: CUDA GPUs through nvidia-smi, else CPU slots; within a Slurm job's
// allocation when there is one.
class SystemDeviceProbe : public DeviceProbe {
 public:
  explicit SystemDeviceProbe(SystemProbeOptions options) : options_(std::move(options)) {}
  absl::StatusOr<std::vector<v1::Slot>> Probe() override;

 private:
  SystemProbeOptions options_;
};

// A probe that returns a fixed slot list. For tests and for pinning a worker's slots.
class FixedDeviceProbe : public DeviceProbe {
 public:
  explicit FixedDeviceProbe(std::vector<v1::Slot> slots) : slots_(std::move(slots)) {}
  absl::StatusOr<std::vector<v1::Slot>> Probe() override { return slots_; }

 private:
  std::vector<v1::Slot> slots_;
};

// Parses `nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader[,nounits]`
// output ("0, NVIDIA H200, 143771 MiB" or "0, NVIDIA H200, 143771") into CUDA slots, each
// with `cores_per_gpu` CPU threads. Blank lines are skipped; a malformed line is
// INVALID_ARGUMENT quoting it.
absl::StatusOr<std::vector<v1::Slot>> ParseNvidiaSmiCsv(absl::string_view csv, int cores_per_gpu);

// `slots` CPU slots of `cores_per_slot` threads each (0 = `total_cores / slots`, at least 1),
// sharing `total_memory_bytes` evenly. INVALID_ARGUMENT if slots < 1 or cores_per_slot < 0.
absl::StatusOr<std::vector<v1::Slot>> MakeCpuSlots(int slots, int cores_per_slot, int total_cores,
                                                   int64_t total_memory_bytes);

}  // namespace xmod

#endif  // XMOD_WORKER_DEVICE_DISCOVERY_H_
