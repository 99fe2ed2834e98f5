// Compute device: see device.h.
#include "model/device.h"

#include <ATen/Context.h>
#include <ATen/DeviceAccelerator.h>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

c10::DeviceIndex IndexOf(torch::Device device) {
  return device.has_index() ? device.index() : at::accelerator::getDeviceIndex();
}

}  // namespace

bool HasCudaBuild() { return at::hasCUDA(); }

std::string TorchBuildSummary() {
  return absl::StrCat("LibTorch ", TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR, ".",
                      TORCH_VERSION_PATCH, " (CUDA ", HasCudaBuild() ? "yes" : "no", ")");
}

void SynchronizeDevice(torch::Device device) {
  if (device.is_cuda()) at::accelerator::synchronizeDevice(IndexOf(device));
}

int64_t PeakDeviceMemoryBytes(torch::Device device) {
  if (!device.is_cuda()) return 0;
  // allocated_bytes[0]: the aggregate over pool types.
  return at::accelerator::getDeviceStats(IndexOf(device)).allocated_bytes[0].peak;
}

void ResetPeakDeviceMemory(torch::Device device) {
  if (device.is_cuda()) at::accelerator::resetPeakStats(IndexOf(device));
}

}  // namespace xmod
