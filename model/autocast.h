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

// Whether this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX-BF16), where a bf16 step
// measured 1.6x faster than fp32 (docs/gpu-training.md, "bf16 on CPU").
bool CpuHasNativeBf16();

// The autocast state of training.precision ("fp32", "bf16" or "auto") on `device`: "auto" is
// bf16 on a CPU with native bf16, fp32 elsewhere (CUDA included: ask for "bf16" there).
AutocastState AutocastForPrecision(const std::string& precision, torch::Device device);

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
