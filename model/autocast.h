// Autocast (mixed precision) of the model and the trainer: which state a run's
// training.precision asks for on its device, the calling thread's autocast state for one
// device type, and a guard that switches it for a scope. Thread-compatible (LibTorch keeps
// autocast state per thread).
#ifndef XMOD_MODEL_AUTOCAST_H_
#define XMOD_MODEL_AUTOCAST_H_

#include <torch/torch.h>

#include <string>

namespace xmod {

// The autocast state of the calling thread for one device type.
struct AutocastState {
  bool enabled = false;
  torch::Dtype dtype = torch::kBFloat16;
};
AutocastState CurrentAutocast(torch::DeviceType device);

// Whether this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX-BF16).
bool CpuHasNativeBf16();

// The narrowest model "auto" runs in bf16 on a CPU. Measured on a CPU with AMX-BF16, one
// thread, bf16 against fp32 tokens/s (docs/gpu-training.md, "bf16 on CPU"): d = 64 0.67x (the
// casts cost more than the products save), d = 128 1.03-1.26x, d = 256 1.5-1.75x.
inline constexpr int64_t kMinBf16AutoWidth = 128;

// The oldest CUDA compute capability with bfloat16 tensor cores: Ampere, sm_80.
inline constexpr int kMinBf16CudaCapability = 8;

// What "auto" weighs on one device: whether a CPU multiplies bfloat16 natively, the compute
// capability major of a GPU (0 when none).
struct Bf16Support {
  bool cpu_native = false;
  int cuda_major = 0;
};
Bf16Support Bf16SupportOf(torch::Device device);

// The autocast state of training.precision ("fp32", "bf16" or "auto") on `device`, which
// offers `support`, for a model of width d_model. "auto" is bf16 on a CUDA device with
// bfloat16 tensor cores (compute capability >= kMinBf16CudaCapability) at any width, on a CPU
// with native bf16 for d_model >= kMinBf16AutoWidth, and fp32 otherwise. Pure.
AutocastState AutocastForPrecision(const std::string& precision, torch::Device device,
                                   const Bf16Support& support, int64_t d_model);
// The same for the device as it is (Bf16SupportOf).
AutocastState AutocastForPrecision(const std::string& precision, torch::Device device,
                                   int64_t d_model);

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

#endif  // XMOD_MODEL_AUTOCAST_H_
