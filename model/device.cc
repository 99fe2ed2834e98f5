// Compute device: see device.h.
#include "model/device.h"

#include <ATen/Context.h>
#include <ATen/DeviceAccelerator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "absl/strings/str_cat.h"

#ifdef XMOD_CUDA
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <cuda_runtime_api.h>
#endif

namespace xmod {
namespace {

c10::DeviceIndex IndexOf(torch::Device device) {
  return device.has_index() ? device.index() : at::accelerator::getDeviceIndex();
}

}  // namespace

// libc10_cuda registers CUDA's device guard when it is loaded, GPU or not.
bool HasCudaBuild() { return c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA); }

std::string TorchBuildSummary() {
  const std::string version = absl::StrCat("LibTorch ", TORCH_VERSION_MAJOR, ".",
                                           TORCH_VERSION_MINOR, ".", TORCH_VERSION_PATCH);
  if (!HasCudaBuild()) return version + " (CPU only)";
  return absl::StrCat(version, " (CUDA, ", torch::cuda::device_count(), " GPUs)");
}

int CudaComputeCapabilityMajor(torch::Device device) {
  if (!device.is_cuda() || !HasCudaBuild() || torch::cuda::device_count() == 0) return 0;
#ifdef XMOD_CUDA
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, IndexOf(device)) ==
      cudaSuccess) {
    return major;
  }
#endif
  return 0;
}

bool DeviceIsCapturing(torch::Device device) {
#ifdef XMOD_CUDA
  if (device.is_cuda() && HasCudaBuild()) {
    return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
  }
#endif
  (void)device;
  return false;
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
