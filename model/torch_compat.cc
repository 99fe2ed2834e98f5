// LibTorch version differences, resolved by the feature macros of <xmod/torch_features.h>.
#include "model/torch_compat.h"

#include <ATen/autocast_mode.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "xmod/torch_features.h"

#if XMOD_TORCH_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/cuda.h>
#endif

namespace xmod {

bool HasFusedAttention() { return XMOD_TORCH_HAS_SDPA_GQA != 0; }

bool HasCudaBuild() { return XMOD_TORCH_HAS_CUDA != 0; }

std::string TorchBuildSummary() {
  return absl::StrCat("LibTorch ", TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR, ".",
                      TORCH_VERSION_PATCH, " (CUDA ", HasCudaBuild() ? "yes" : "no",
                      ", fused attention ", HasFusedAttention() ? "yes" : "no", ")");
}

void SynchronizeDevice(torch::Device device) {
#if XMOD_TORCH_HAS_CUDA
  if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? -1 : device.index());
#endif
}

int64_t PeakDeviceMemoryBytes(torch::Device device) {
#if XMOD_TORCH_HAS_CUDA
  if (device.is_cuda()) {
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return stats.allocated_bytes[0].peak;  // [0]: StatType::AGGREGATE
  }
#endif
  return 0;
}

void ResetPeakDeviceMemory(torch::Device device) {
#if XMOD_TORCH_HAS_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
  }
#endif
}

torch::Tensor FusedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& allowed) {
#if XMOD_TORCH_HAS_SDPA_GQA
  const bool causal = !allowed.defined();
  std::optional<torch::Tensor> mask;
  if (!causal) mask = allowed;
  return at::scaled_dot_product_attention(q, k, v, mask, /*dropout_p=*/0.0, causal,
                                          /*scale=*/1.0, /*enable_gqa=*/k.size(1) != q.size(1));
#else
  TORCH_CHECK(false, "fused attention needs LibTorch >= 2.5 (", TorchBuildSummary(), ")");
#endif
}

#if XMOD_TORCH_HAS_DEVICE_AUTOCAST

AutocastState CurrentAutocast(torch::DeviceType device) {
  return {at::autocast::is_autocast_enabled(device), at::autocast::get_autocast_dtype(device)};
}

static void SetAutocast(torch::DeviceType device, const AutocastState& state) {
  at::autocast::set_autocast_enabled(device, state.enabled);
  at::autocast::set_autocast_dtype(device, state.dtype);
}

#else  // LibTorch 1.13: separate CPU and GPU switches.

AutocastState CurrentAutocast(torch::DeviceType device) {
  if (device == torch::kCUDA) {
    return {at::autocast::is_enabled(), at::autocast::get_autocast_gpu_dtype()};
  }
  return {at::autocast::is_cpu_enabled(), at::autocast::get_autocast_cpu_dtype()};
}

static void SetAutocast(torch::DeviceType device, const AutocastState& state) {
  if (device == torch::kCUDA) {
    at::autocast::set_enabled(state.enabled);
    at::autocast::set_autocast_gpu_dtype(state.dtype);
  } else {
    at::autocast::set_cpu_enabled(state.enabled);
    at::autocast::set_autocast_cpu_dtype(state.dtype);
  }
}

#endif

AutocastGuard::AutocastGuard(torch::DeviceType device, AutocastState state)
    : device_(device), previous_(CurrentAutocast(device)), active_(state.enabled) {
  if (!active_) return;
  at::autocast::increment_nesting();
  SetAutocast(device_, state);
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  SetAutocast(device_, previous_);
  // The cache of casted weights lives until the outermost autocast region ends.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
}

}  // namespace xmod
