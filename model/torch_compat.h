// torch_compat: the LibTorch APIs that differ between the versions xmod builds against —
// Debian's LibTorch 1.13 (CPU) and LibTorch 2.x from the PyPI wheel (CUDA, NCCL). The
// feature checks live in cmake/XmodTorch.cmake; this module is the only code that reads
// their results, so the model and the trainer never test a LibTorch version.
// Legend: B = batch, H = query heads, G = key/value heads, Tq/Tk = query/key tokens,
// E = head_dim. Thread-compatible (autocast state is thread-local in LibTorch).
#ifndef XMOD_MODEL_TORCH_COMPAT_H_
#define XMOD_MODEL_TORCH_COMPAT_H_

#include <torch/torch.h>

#include <string>

namespace xmod {

// Whether this LibTorch has fused scaled-dot-product attention with grouped-query heads.
bool HasFusedAttention();

// Whether this LibTorch was built with CUDA (libtorch_cuda linked; a GPU may still be absent).
bool HasCudaBuild();

// "LibTorch <version> (CUDA yes/no, fused attention yes/no)", for logs and benchmarks.
std::string TorchBuildSummary();

// Waits until the device has finished its queued work (a no-op on the CPU).
void SynchronizeDevice(torch::Device device);

// The most bytes the caching allocator had allocated on a CUDA device since the last reset
// (0 on the CPU or without CUDA); ResetPeakDeviceMemory starts a new window.
int64_t PeakDeviceMemoryBytes(torch::Device device);
void ResetPeakDeviceMemory(torch::Device device);

// softmax(q kᵀ + mask) v through at::scaled_dot_product_attention. q: (B, H, Tq, E), already
// scaled; k, v: (B, G, Tk, E) with G dividing H (query head h uses key/value head h / (H/G)).
// allowed: bool, broadcastable to (B, 1, Tq, Tk), true where a query may see a key; when
// undefined, plain causal attention (Tq == Tk). Returns (B, H, Tq, E). Only callable when
// HasFusedAttention().
torch::Tensor FusedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& allowed);

// The autocast (mixed-precision) state of the calling thread for one device type.
struct AutocastState {
  bool enabled = false;
  torch::Dtype dtype = torch::kBFloat16;
};
AutocastState CurrentAutocast(torch::DeviceType device);

// Enables autocast to `dtype` for `device` in its scope (nothing when `enabled` is false),
// restoring the previous state and clearing the cast cache on exit.
class AutocastGuard {
 public:
  AutocastGuard(torch::DeviceType device, AutocastState state);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  torch::DeviceType device_;
  AutocastState previous_;
  bool active_;
};

}  // namespace xmod

#endif  // XMOD_MODEL_TORCH_COMPAT_H_
