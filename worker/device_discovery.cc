#include "worker/device_discovery.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"

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

// A positive CPU count: SLURM_CPUS_ON_NODE is "N", SLURM_JOB_CPUS_PER_NODE is "N(xM),..." with
// this node's count first (the batch step runs on the allocation's first node).
absl::StatusOr<int> ParseCpuCount(const char* variable, absl::string_view value) {
  absl::string_view first = value.substr(0, value.find_first_of("(,"));
  int cpus = 0;
  if (!absl::SimpleAtoi(first, &cpus) || cpus < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(variable, ": \"", value, "\" is not a positive CPU count"));
  }
  return cpus;
}

absl::StatusOr<std::vector<int>> ParseGpuIndices(const char* variable, absl::string_view value) {
  std::vector<int> gpus;
  for (absl::string_view entry : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    int index = 0;
    if (!absl::SimpleAtoi(entry, &index) || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          variable, ": \"", value, "\" is not a list of GPU indices (\"", entry, "\")"));
    }
    gpus.push_back(index);
  }
  return gpus;
}

}  // namespace

std::optional<std::string> ProcessEnvironment(const char* name) {
  const char* value = getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

absl::StatusOr<std::optional<SlurmAllocation>> ReadSlurmAllocation(const EnvironmentLookup& env) {
  std::optional<std::string> job_id = env("SLURM_JOB_ID");
  if (!job_id.has_value()) return std::nullopt;
  SlurmAllocation allocation;
  allocation.job_id = *job_id;
  for (const char* variable : {"SLURM_CPUS_ON_NODE", "SLURM_JOB_CPUS_PER_NODE"}) {
    std::optional<std::string> value = env(variable);
    if (!value.has_value()) continue;
    absl::StatusOr<int> cpus = ParseCpuCount(variable, *value);
    if (!cpus.ok()) return cpus.status();
    allocation.cpus = *cpus;
    break;
  }
  for (const char* variable : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"}) {
    std::optional<std::string> value = env(variable);
    if (!value.has_value()) continue;
    absl::StatusOr<std::vector<int>> gpus = ParseGpuIndices(variable, *value);
    if (!gpus.ok()) return gpus.status();
    allocation.gpus = *std::move(gpus);
    allocation.gpus_from = variable;
    break;
  }
  return allocation;
}

absl::StatusOr<std::vector<v1::Slot>> SelectAllocatedGpus(std::vector<v1::Slot> listed,
                                                          const SlurmAllocation& allocation) {
  std::vector<v1::Slot> selected;
  if (listed.size() == allocation.gpus.size()) {
    selected = std::move(listed);
  } else {
    for (int index : allocation.gpus) {
      auto it = std::find_if(listed.begin(), listed.end(),
                             [index](const v1::Slot& slot) { return slot.device() == index; });
      if (it == listed.end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            allocation.gpus_from, ": Slurm allocated GPU ", index, " but nvidia-smi lists ",
            listed.empty() ? "no GPU" : "no GPU with that index"));
      }
      selected.push_back(*it);
    }
  }
  for (size_t i = 0; i < selected.size(); ++i) selected[i].set_index(static_cast<int32_t>(i));
  return selected;
}

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

namespace {

// The machine's cores, or inside a Slurm job its allocated CPUs (logged with its GPUs).
int TotalCores(const std::optional<SlurmAllocation>& slurm) {
  int total_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!slurm.has_value()) return total_cores;
  if (slurm->cpus > 0) total_cores = slurm->cpus;
  LOG(INFO) << "Slurm job " << slurm->job_id << ": " << total_cores << " CPUs, GPUs ["
            << absl::StrJoin(slurm->gpus, ",") << "]" << (slurm->gpus_from.empty() ? "" : " from ")
            << slurm->gpus_from;
  return total_cores;
}

// The GPUs `nvidia_smi_command` lists (none when it cannot run), inside a Slurm job only
// the allocated ones.
absl::StatusOr<std::vector<v1::Slot>> UsableGpus(const std::string& nvidia_smi_command,
                                                 const std::optional<SlurmAllocation>& slurm) {
  std::vector<v1::Slot> gpus;
  absl::StatusOr<std::string> csv = RunCommand(nvidia_smi_command);
  if (csv.ok()) {
    absl::StatusOr<std::vector<v1::Slot>> listed = ParseNvidiaSmiCsv(*csv, 1);
    if (!listed.ok()) return listed.status();
    gpus = *std::move(listed);
  }
  if (!slurm.has_value()) return gpus;
  return SelectAllocatedGpus(std::move(gpus), *slurm);
}

}  // namespace

absl::StatusOr<std::vector<v1::Slot>> SystemDeviceProbe::Probe() {
  absl::StatusOr<std::optional<SlurmAllocation>> slurm = ReadSlurmAllocation(options_.environment);
  if (!slurm.ok()) return slurm.status();
  const int total_cores = TotalCores(*slurm);
  // Outside Slurm every GPU nvidia-smi lists is ours; inside, only allocated ones.
  const bool look_for_gpus = options_.use_gpus && !options_.nvidia_smi_command.empty() &&
                             (!slurm->has_value() || !(*slurm)->gpus.empty());
  if (look_for_gpus) {
    absl::StatusOr<std::vector<v1::Slot>> gpus = UsableGpus(options_.nvidia_smi_command, *slurm);
    if (!gpus.ok()) return gpus.status();
    if (!gpus->empty()) {
      // The cores are shared among the GPUs' data loaders and launch threads.
      int cores = options_.cores_per_slot > 0
                      ? options_.cores_per_slot
                      : std::max(1, total_cores / static_cast<int>(gpus->size()));
      for (v1::Slot& slot : *gpus) slot.set_cores(cores);
      return gpus;
    }
  }
  int64_t memory = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  return MakeCpuSlots(options_.cpu_slots, options_.cores_per_slot, total_cores, memory);
}

}  // namespace xmod
