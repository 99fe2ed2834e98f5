// See gpu_telemetry.h.
#include "worker/gpu_telemetry.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

// NVML's C interface, as its documentation declares the entry points used here. Every call
// returns an nvmlReturn_t: 0 is NVML_SUCCESS; NVML_ERROR_NOT_SUPPORTED (3) means the GPU does
// not report that value; NVML_ERROR_INSUFFICIENT_SIZE (7) asks for a larger buffer.
using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlNotSupported = 3;
constexpr NvmlReturn kNvmlInsufficientSize = 7;
constexpr int kNvmlTemperatureGpu = 0;   // NVML_TEMPERATURE_GPU
constexpr unsigned int kNameBytes = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE

struct NvmlUtilization {
  unsigned int gpu;     // percent of the sample period a kernel ran
  unsigned int memory;  // percent of the sample period memory was read or written
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlProcessInfo {  // nvmlProcessInfo_t (v2 and v3 share this layout)
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

}  // namespace

struct GpuTelemetry::Api {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  const char* (*error_string)(NvmlReturn);
  NvmlReturn (*device_count)(unsigned int*);
  NvmlReturn (*device_by_index)(unsigned int, NvmlDevice*);
  NvmlReturn (*device_name)(NvmlDevice, char*, unsigned int);
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*);
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*);
  NvmlReturn (*power_milliwatts)(NvmlDevice, unsigned int*);
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned int*);
  NvmlReturn (*processes)(NvmlDevice, unsigned int*, NvmlProcessInfo*);

  // INTERNAL naming the call and NVML's message.
  absl::Status Error(const char* call, NvmlReturn code) const {
    return absl::InternalError(absl::StrCat("NVML ", call, ": ", error_string(code)));
  }
};

namespace {

// Looks `name` up in `handle` into `*fn`; false when it is missing.
template <typename Fn>
bool Find(void* handle, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return *fn != nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuTelemetry>> GpuTelemetry::Load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot load ", library, ": ", dlerror()));
  }
  auto api = std::make_unique<Api>();
  const std::pair<const char*, bool> found[] = {
      {"nvmlInit_v2", Find(handle, "nvmlInit_v2", &api->init)},
      {"nvmlShutdown", Find(handle, "nvmlShutdown", &api->shutdown)},
      {"nvmlErrorString", Find(handle, "nvmlErrorString", &api->error_string)},
      {"nvmlDeviceGetCount_v2", Find(handle, "nvmlDeviceGetCount_v2", &api->device_count)},
      {"nvmlDeviceGetHandleByIndex_v2",
       Find(handle, "nvmlDeviceGetHandleByIndex_v2", &api->device_by_index)},
      {"nvmlDeviceGetName", Find(handle, "nvmlDeviceGetName", &api->device_name)},
      {"nvmlDeviceGetUtilizationRates",
       Find(handle, "nvmlDeviceGetUtilizationRates", &api->utilization)},
      {"nvmlDeviceGetMemoryInfo", Find(handle, "nvmlDeviceGetMemoryInfo", &api->memory)},
      {"nvmlDeviceGetPowerUsage", Find(handle, "nvmlDeviceGetPowerUsage", &api->power_milliwatts)},
      {"nvmlDeviceGetTemperature", Find(handle, "nvmlDeviceGetTemperature", &api->temperature)},
      {"nvmlDeviceGetComputeRunningProcesses_v3",
       Find(handle, "nvmlDeviceGetComputeRunningProcesses_v3", &api->processes)},
  };
  for (const auto& [name, ok] : found) {
    if (!ok) {
      dlclose(handle);
      return absl::UnavailableError(absl::StrCat(library, " has no ", name));
    }
  }
  if (NvmlReturn code = api->init(); code != kNvmlSuccess) {
    absl::Status status = api->Error("nvmlInit_v2", code);
    dlclose(handle);
    return status;
  }
  return std::unique_ptr<GpuTelemetry>(new GpuTelemetry(handle, std::move(api)));
}

GpuTelemetry::GpuTelemetry(void* handle, std::unique_ptr<Api> api)
    : handle_(handle), api_(std::move(api)) {}

GpuTelemetry::~GpuTelemetry() {
  api_->shutdown();
  dlclose(handle_);
}

namespace {

// The compute processes on `device` with their memory; empty when NVML cannot list them.
std::vector<GpuReading::Process> ProcessesOn(NvmlReturn (*processes)(NvmlDevice, unsigned int*,
                                                                     NvmlProcessInfo*),
                                             NvmlDevice device) {
  std::vector<NvmlProcessInfo> infos(8);
  while (true) {
    unsigned int count = static_cast<unsigned int>(infos.size());
    const NvmlReturn code = processes(device, &count, infos.data());
    if (code == kNvmlInsufficientSize && count > infos.size()) {
      infos.resize(count + 4);  // more started meanwhile: a little room
      continue;
    }
    std::vector<GpuReading::Process> out;
    if (code != kNvmlSuccess) return out;
    for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
      out.push_back(
          {static_cast<int>(infos[i].pid), static_cast<int64_t>(infos[i].used_gpu_memory)});
    }
    return out;
  }
}

}  // namespace

absl::StatusOr<std::vector<GpuReading>> GpuTelemetry::Sample() const {
  unsigned int count = 0;
  if (NvmlReturn code = api_->device_count(&count); code != kNvmlSuccess) {
    return api_->Error("nvmlDeviceGetCount_v2", code);
  }
  std::vector<GpuReading> out;
  for (unsigned int i = 0; i < count; ++i) {
    NvmlDevice device = nullptr;
    if (NvmlReturn code = api_->device_by_index(i, &device); code != kNvmlSuccess) {
      return api_->Error("nvmlDeviceGetHandleByIndex_v2", code);
    }
    GpuReading reading;
    reading.index = static_cast<int>(i);
    char name[kNameBytes] = {0};
    if (api_->device_name(device, name, kNameBytes) == kNvmlSuccess) reading.name = name;
    NvmlUtilization utilization{};
    reading.utilization =
        api_->utilization(device, &utilization) == kNvmlSuccess ? utilization.gpu / 100.0 : -1;
    NvmlMemory memory{};
    if (NvmlReturn code = api_->memory(device, &memory); code != kNvmlSuccess) {
      return api_->Error("nvmlDeviceGetMemoryInfo", code);
    }
    reading.memory_used_bytes = static_cast<int64_t>(memory.used);
    reading.memory_total_bytes = static_cast<int64_t>(memory.total);
    unsigned int milliwatts = 0;
    const NvmlReturn power = api_->power_milliwatts(device, &milliwatts);
    reading.power_watts = power == kNvmlSuccess ? milliwatts / 1000.0 : -1;
    if (power != kNvmlSuccess && power != kNvmlNotSupported) {
      return api_->Error("nvmlDeviceGetPowerUsage", power);
    }
    unsigned int celsius = 0;
    reading.temperature_celsius =
        api_->temperature(device, kNvmlTemperatureGpu, &celsius) == kNvmlSuccess ? celsius : -1;
    reading.processes = ProcessesOn(api_->processes, device);
    out.push_back(std::move(reading));
  }
  return out;
}

}  // namespace xmod
