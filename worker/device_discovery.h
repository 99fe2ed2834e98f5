// Device discovery: the slots a worker offers the coordinator (docs/design.md, "Processes").
// One slot per CUDA GPU when `nvidia-smi` lists any (no CUDA library is linked: the tool's
// CSV output is parsed), otherwise CPU slots that split the machine's cores. Behind the
// DeviceProbe interface so that tests can hand a worker any set of slots.
//
// Thread-safety: probes are immutable after construction; Probe() may be called from any
// thread.
#ifndef XMOD_WORKER_DEVICE_DISCOVERY_H_
#define XMOD_WORKER_DEVICE_DISCOVERY_H_

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

struct SystemProbeOptions {
  int cpu_slots = 1;       // CPU slots when there is no GPU
  int cores_per_slot = 0;  // 0 = the machine's cores divided evenly among the CPU slots
  bool use_gpus = true;    // false: CPU slots even on a GPU machine
  // Command whose CSV output lists the GPUs; failing or printing nothing means "no GPU".
  std::string nvidia_smi_command =
      "nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits 2>/dev/null";
};

// The real probe: CUDA GPUs through nvidia-smi, else CPU slots.
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
