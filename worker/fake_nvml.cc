// A stand-in for NVML's libnvidia-ml.so.1 (worker/gpu_telemetry.h), built as a shared library
// for tests: it answers the entry points the worker looks up from a state file the test writes,
// read again at every nvmlDeviceGetCount_v2, so a test can change what "the GPUs" report
// between samples. The file is $FAKE_NVML_STATE, one line per GPU or process:
//   gpu <index> <utilization %> <memory used bytes> <memory total bytes> <power mW|-> <°C> <name>
//   proc <gpu index> <pid> <memory bytes>
// GPUs must be listed in index order. FAKE_NVML_FAIL_INIT=1 makes nvmlInit_v2 fail.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct FakeGpu {
  unsigned int utilization = 0;
  unsigned long long used = 0;
  unsigned long long total = 0;
  long long power_milliwatts = -1;  // -1: not supported
  unsigned int celsius = 0;
  std::string name;
  std::vector<std::pair<unsigned int, unsigned long long>> processes;  // pid, bytes
};

std::vector<FakeGpu> gpus;

void LoadState() {
  gpus.clear();
  const char* path = std::getenv("FAKE_NVML_STATE");
  if (path == nullptr) return;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "gpu") {
      FakeGpu gpu;
      unsigned int index = 0;
      std::string power;
      fields >> index >> gpu.utilization >> gpu.used >> gpu.total >> power >> gpu.celsius;
      std::getline(fields >> std::ws, gpu.name);
      gpu.power_milliwatts = power == "-" ? -1 : std::stoll(power);
      gpus.push_back(gpu);
    } else if (kind == "proc") {
      unsigned int index = 0, pid = 0;
      unsigned long long bytes = 0;
      fields >> index >> pid >> bytes;
      if (index < gpus.size()) gpus[index].processes.push_back({pid, bytes});
    }
  }
}

FakeGpu* Gpu(void* device) { return static_cast<FakeGpu*>(device); }

struct ProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

}  // namespace

extern "C" {

int nvmlInit_v2() {
  const char* fail = std::getenv("FAKE_NVML_FAIL_INIT");
  return fail != nullptr && std::strcmp(fail, "1") == 0 ? 9 /* NVML_ERROR_DRIVER_NOT_LOADED */
                                                        : 0;
}
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int code) { return code == 9 ? "Driver Not Loaded" : "Unknown Error"; }

int nvmlDeviceGetCount_v2(unsigned int* count) {
  LoadState();
  *count = static_cast<unsigned int>(gpus.size());
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= gpus.size()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &gpus[index];
  return 0;
}

int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  std::strncpy(name, Gpu(device)->name.c_str(), length - 1);
  name[length - 1] = '\0';
  return 0;
}

int nvmlDeviceGetUtilizationRates(void* device, unsigned int* utilization) {
  utilization[0] = Gpu(device)->utilization;  // gpu
  utilization[1] = 0;                         // memory
  return 0;
}

int nvmlDeviceGetMemoryInfo(void* device, unsigned long long* memory) {
  memory[0] = Gpu(device)->total;
  memory[1] = Gpu(device)->total - Gpu(device)->used;
  memory[2] = Gpu(device)->used;
  return 0;
}

int nvmlDeviceGetPowerUsage(void* device, unsigned int* milliwatts) {
  if (Gpu(device)->power_milliwatts < 0) return 3;  // NVML_ERROR_NOT_SUPPORTED
  *milliwatts = static_cast<unsigned int>(Gpu(device)->power_milliwatts);
  return 0;
}

int nvmlDeviceGetTemperature(void* device, int, unsigned int* celsius) {
  *celsius = Gpu(device)->celsius;
  return 0;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count, void* infos) {
  const auto& processes = Gpu(device)->processes;
  if (*count < processes.size()) {
    *count = static_cast<unsigned int>(processes.size());
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  auto* out = static_cast<ProcessInfo*>(infos);
  for (size_t i = 0; i < processes.size(); ++i) {
    out[i] = ProcessInfo{processes[i].first, processes[i].second, 0, 0};
  }
  *count = static_cast<unsigned int>(processes.size());
  return 0;
}

}  // extern "C"
