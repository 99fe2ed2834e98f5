// Recordings of the training step's phases: see step_graph.h.
#include "model/train/step_graph.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "model/device.h"

// CUDA's graphs are LibTorch's at::cuda::CUDAGraph, compiled in the CUDA build only (XMOD_CUDA,
// as the runtime calls of device.cc). LibTorch's device-generic at::accelerator::Graph cannot
// serve: libtorch_cuda registers no implementation of it (2.15).
#ifdef XMOD_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace xmod {
namespace {

#ifdef XMOD_CUDA
// CUDAGraph recordings on a pool stream of the device; the first recording's private memory
// pool is shared by the later ones.
class DeviceStepGraphs : public StepGraphs {
 public:
  explicit DeviceStepGraphs(torch::Device device)
      : device_(device),
        stream_(c10::impl::VirtualGuardImpl(device.type()).getStreamFromGlobalPool(device)) {}

  void Run(const std::function<void()>& phase) override {
    SynchronizeDevice(device_);  // the stream sees this step's inputs, copied on another
    {
      c10::StreamGuard on_stream(stream_);
      phase();
    }
    SynchronizeDevice(device_);
  }

  void Capture(int index, const std::function<void()>& phase) override {
    TORCH_CHECK(index == static_cast<int>(graphs_.size()), "recording ", index, " out of order");
    SynchronizeDevice(device_);
    // The warm-up steps' blocks, cached for stream_, go back to the device first: during a
    // capture the allocator neither frees cached blocks nor serves them to the recording's
    // private pool, so they would double the activations' memory at the first capture (as
    // torch.cuda.graph does).
    c10::cuda::CUDACachingAllocator::emptyCache();
    graphs_.push_back(std::make_unique<at::cuda::CUDAGraph>());
    at::cuda::CUDAGraph& graph = *graphs_.back();
    c10::StreamGuard on_stream(stream_);
    graph.capture_begin(index == 0 ? c10::MempoolId_t{0, 0} : graphs_.front()->pool());
    try {
      phase();
    } catch (...) {
      // A phase that fails while recorded (out of memory, an operation a graph cannot hold)
      // ends the capture before the error goes on, so the stream leaves capture mode.
      try {
        graph.capture_end();
      } catch (...) {
      }
      graphs_.pop_back();
      throw;
    }
    graph.capture_end();
  }

  void Replay(int index) override { graphs_.at(index)->replay(); }

 private:
  torch::Device device_;
  c10::Stream stream_;
  std::vector<std::unique_ptr<at::cuda::CUDAGraph>> graphs_;
};
#endif  // XMOD_CUDA

}  // namespace

bool DeviceHasGraphs(torch::Device device) {
#ifdef XMOD_CUDA
  return device.is_cuda() && HasCudaBuild();
#else
  (void)device;
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<StepGraphs>> MakeDeviceStepGraphs(torch::Device device) {
  if (!DeviceHasGraphs(device)) {
    return absl::FailedPreconditionError(
        absl::StrCat("this build records no graphs on ", device.str(), " (", TorchBuildSummary(),
                     "; CUDA graphs need a build with -DXMOD_CUDA=ON)"));
  }
#ifdef XMOD_CUDA
  return std::make_unique<DeviceStepGraphs>(device);
#else
  return absl::InternalError("unreachable: DeviceHasGraphs is false without XMOD_CUDA");
#endif
}

absl::StatusOr<bool> UseStepGraphs(const std::string& setting,
                                   const StepGraphConditions& conditions) {
  if (setting == "off") return false;
  std::string why_not;
  if (!conditions.device_has_graphs) {
    why_not = "a CUDA device (--device cuda:N, a build with -DXMOD_CUDA=ON)";
  } else if (conditions.world_size > 1) {
    why_not = "one rank (the data-parallel all-reduce of a step runs eagerly)";
  } else if (!conditions.static_step) {
    why_not = "a step of static shapes (MoE reads its experts' row counts on the host)";
  }
  if (setting == "auto") return kStepGraphsByDefault && why_not.empty();
  if (!why_not.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("training.cuda_graphs: \"on\" needs ", why_not));
  }
  return true;
}

}  // namespace xmod
