// Autocast (mixed precision) scopes of the model and the trainer: the calling thread's
// autocast state for one device type, and a guard that switches it for a scope. Thread-
// compatible (LibTorch keeps autocast state per thread).
#ifndef XMOD_MODEL_AUTOCAST_H_
#define XMOD_MODEL_AUTOCAST_H_

#include <torch/torch.h>

namespace xmod {

// The autocast state of the calling thread for one device type.
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

#endif  // XMOD_MODEL_AUTOCAST_H_
