// The compute device of the model, the trainer and the benchmark: what this LibTorch build
// can run on, device synchronisation and peak device memory. One source for CPU-only and CUDA
// builds: CUDA is reached through LibTorch's accelerator interface, which libtorch_cuda
// registers when it is linked (-DXMOD_CUDA=ON), so nothing here but CudaComputeCapabilityMajor
// is compiled per build.
#ifndef XMOD_MODEL_DEVICE_H_
#define XMOD_MODEL_DEVICE_H_

#include <torch/torch.h>

#include <string>

namespace xmod {

// Whether libtorch_cuda is linked (-DXMOD_CUDA=ON); a GPU may still be absent.
bool HasCudaBuild();

// "LibTorch <version> (CPU only)" or "LibTorch <version> (CUDA, <n> GPUs)", for logs and
// benchmarks.
std::string TorchBuildSummary();

// The major compute capability of a CUDA device (8 = Ampere, 9 = Hopper, 10 = Blackwell); 0 for
// the CPU, in a build without CUDA, or when no such GPU is visible. The one function compiled
// per build: it asks the CUDA runtime (-DXMOD_CUDA=ON links it), which LibTorch's accelerator
// interface does not expose.
int CudaComputeCapabilityMajor(torch::Device device);

// Whether the current stream of `device` is being recorded into a CUDA graph (false on a
// CPU and in a build without CUDA): work that reads the host or waits must not run then.
bool DeviceIsCapturing(torch::Device device);

// Waits until the device has finished its queued work (a no-op on the CPU).
void SynchronizeDevice(torch::Device device);

// The most bytes the caching allocator had allocated on a CUDA device since the last reset
// (0 on the CPU); ResetPeakDeviceMemory starts a new window.
int64_t PeakDeviceMemoryBytes(torch::Device device);
void ResetPeakDeviceMemory(torch::Device device);

}  // namespace xmod

#endif  // XMOD_MODEL_DEVICE_H_
