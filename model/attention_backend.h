// Which of at::scaled_dot_product_attention's CUDA backends runs each attention shape, by
// measurement (docs/gpu-training.md, "Attention by measurement"). SDPA picks a backend by
// fixed heuristics; here, the first time a shape appears on a GPU — in the training step's
// first, eager step, never inside a recorded one (step_graph.h) — each fused backend that
// accepts it (FlashAttention-2, FlashAttention-3, memory-efficient, cuDNN) runs the forward
// and backward of random tensors of that shape a few times, and the fastest is used for that
// shape for the rest of the process. The shapes of a run are few: Dense's L and the routed
// layers' L/K (and, in evaluation, the threshold rule's padded counts and masks).
//
// On the CPU, and with a mask (evaluation's threshold rule, Selected-Q/full-KV), nothing is
// measured: SDPA chooses as configured.
// Thread-safe: the choices are cached under a mutex; SdpaBackendGuard changes LibTorch's
// process-wide backend switches and is meant for the training thread.
#ifndef XMOD_MODEL_ATTENTION_BACKEND_H_
#define XMOD_MODEL_ATTENTION_BACKEND_H_

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace xmod {

// kDefault leaves SDPA's own choice among the enabled backends.
enum class SdpaBackend { kDefault, kFlash, kFlash3, kEfficient, kCudnn };
const char* SdpaBackendName(SdpaBackend backend);

// What a measurement is keyed by: (B, H, G, Tq, Tk, E), the dtype, and the device.
struct SdpaShape {
  std::vector<int64_t> dims;
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::Device device{c10::DeviceType::CPU};
  bool operator<(const SdpaShape& other) const;
};

// The backend for causal attention of q (B, H, Tq, E) over k, v (B, G, Tk, E) (SDPA's layout,
// G dividing H): kDefault on the CPU; on CUDA the fastest backend measured for the shape,
// measuring on the first call (which then waits for the device). `measure` times one
// backend's forward and backward at the shape, in seconds, or returns a negative number when
// the backend refuses it; tests pass their own.
using SdpaTimer = std::function<double(SdpaBackend, const SdpaShape&)>;
SdpaBackend ChooseSdpaBackend(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, const SdpaTimer& measure = nullptr);

// The fastest of `seconds` (negative: refused); kDefault when all refused. Pure.
SdpaBackend Fastest(const std::map<SdpaBackend, double>& seconds);

// The choices made so far, for logs and bench_model's report: "B,H,G,Tq,Tk,E dtype" -> backend.
std::map<std::string, std::string> SdpaChoices();

// While it lives, SDPA may use `backend` only (kDefault: changes nothing); restores the
// switches as they were.
class SdpaBackendGuard {
 public:
  explicit SdpaBackendGuard(SdpaBackend backend);
  ~SdpaBackendGuard();
  SdpaBackendGuard(const SdpaBackendGuard&) = delete;
  SdpaBackendGuard& operator=(const SdpaBackendGuard&) = delete;

 private:
  bool active_;
  bool flash_, flash3_, efficient_, cudnn_, math_;
};

}  // namespace xmod

#endif  // XMOD_MODEL_ATTENTION_BACKEND_H_
