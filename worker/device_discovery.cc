#include "worker/device_discovery.h"

#include <stdio.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace xmod {
namespace {

// Stdout of `command`, or an error when it could not be run or exited non-zero.
absl::StatusOr<std::string> RunCommand(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::UnavailableError(absl::StrCat("cannot run: ", command));
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  int status = pclose(pipe);
  if (status != 0)
    return absl::UnavailableError(absl::StrCat("exit status ", status, ": ", command));
  return out;
}

}  // namespace

absl::StatusOr<std::vector<v1::Slot>> ParseNvidiaSmiCsv(absl::string_view csv, int cores_per_gpu) {
  std::vector<v1::Slot> slots;
  for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    for (auto& field : fields) field = absl::StripAsciiWhitespace(field);
    int device = 0;
    if (fields.size() != 3 || !absl::SimpleAtoi(fields[0], &device)) {
      return absl::InvalidArgumentError(absl::StrCat("nvidia-smi line: \"", line, "\""));
    }
    absl::string_view memory = fields[2];
    absl::ConsumeSuffix(&memory, "MiB");
    int64_t mib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(memory), &mib)) {
      return absl::InvalidArgumentError(absl::StrCat("nvidia-smi memory: \"", line, "\""));
    }
    v1::Slot slot;
    slot.set_index(static_cast<int32_t>(slots.size()));
    slot.set_kind(v1::CUDA);
    slot.set_device(device);
    slot.set_cores(cores_per_gpu);
    slot.set_memory_bytes(mib * 1024 * 1024);
    slot.set_description(std::string(fields[1]));
    slots.push_back(std::move(slot));
  }
  return slots;
}

absl::StatusOr<std::vector<v1::Slot>> MakeCpuSlots(int slots, int cores_per_slot, int total_cores,
                                                   int64_t total_memory_bytes) {
  if (slots < 1) return absl::InvalidArgumentError("cpu_slots: must be >= 1");
  if (cores_per_slot < 0) return absl::InvalidArgumentError("cores_per_slot: must be >= 0");
  int cores = cores_per_slot > 0 ? cores_per_slot : std::max(1, total_cores / slots);
  std::vector<v1::Slot> result;
  for (int i = 0; i < slots; ++i) {
    v1::Slot slot;
    slot.set_index(i);
    slot.set_kind(v1::CPU);
    slot.set_cores(cores);
    slot.set_memory_bytes(total_memory_bytes / slots);
    slot.set_description("cpu");
    result.push_back(std::move(slot));
  }
  return result;
}

absl::StatusOr<std::vector<v1::Slot>> SystemDeviceProbe::Probe() {
  int total_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (options_.use_gpus && !options_.nvidia_smi_command.empty()) {
    absl::StatusOr<std::string> csv = RunCommand(options_.nvidia_smi_command);
    if (csv.ok()) {
      absl::StatusOr<std::vector<v1::Slot>> gpus = ParseNvidiaSmiCsv(*csv, 1);
      if (!gpus.ok()) return gpus.status();
      if (!gpus->empty()) {
        // The host's cores are shared among the GPUs' data loaders and launch threads.
        int cores = options_.cores_per_slot > 0
                        ? options_.cores_per_slot
                        : std::max(1, total_cores / static_cast<int>(gpus->size()));
        for (v1::Slot& slot : *gpus) slot.set_cores(cores);
        return gpus;
      }
    }
  }
  int64_t memory = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  return MakeCpuSlots(options_.cpu_slots, options_.cores_per_slot, total_cores, memory);
}

}  // namespace xmod
