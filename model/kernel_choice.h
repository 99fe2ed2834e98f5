// Where each of the model's fused operations runs: the one place that chooses, by the tensors'
// device, dtype and layout, between xmod's CPU kernels (model/cpu/), xmod's CUDA kernels
// (model/cuda/, in builds with -DXMOD_CUDA=ON and nvcc) and ATen's composite formula (every
// other case, and the reference the kernels are tested against). The layers ask here and run
// what they are given; none tests a device itself.
//
// Operations with kernels on both devices (the SwiGLU gate, RMSNorm, the next-token loss)
// are chosen as a table of entry points with one signature on every path, so one autograd
// node per operation serves both (ffn.cc, rms_norm.cc, transformer.cc). Those with CPU kernels
// only (RoPE, the router's gather and the routed rows' update, causal flash attention) are
// chosen as a yes or no for the CPU; elsewhere they take ATen's composite.
//
// ScopedCompositeKernels makes every choice the composite formula while it lives: the CUDA
// path's ATen operations, run on a CPU (the host-synchronisation test of train_step_test.cc;
// comparisons of the kernels against the formula).
// Thread-safe: the tables are constant; the override is one process-wide counter.
#ifndef XMOD_MODEL_KERNEL_CHOICE_H_
#define XMOD_MODEL_KERNEL_CHOICE_H_

#include <torch/torch.h>

#include <array>
#include <initializer_list>
#include <optional>
#include <utility>

namespace xmod {

enum class KernelPath { kComposite, kCpu, kCuda };
const char* KernelPathName(KernelPath path);  // "composite", "cpu", "cuda"

// What a choice looks at of one tensor.
struct TensorKind {
  c10::DeviceType device = c10::DeviceType::CPU;
  c10::ScalarType dtype = c10::ScalarType::Float;
  bool contiguous = true;
};
TensorKind KindOf(const torch::Tensor& t);

// The operations the CUDA kernels cover, and the rule that picks their path. Pure: a path for
// tensors of these kinds (all of one device) in a build with or without the CUDA kernels.
//  - kSwiGlu (a, b): CPU float/double/bfloat16, one dtype; CUDA float/bfloat16, contiguous.
//  - kRmsNorm (x, w): CPU float/double, one dtype; CUDA x float/bfloat16 contiguous, w float.
//  - kNextTokenLoss (logits, targets): logits float/bfloat16 (CPU also double), contiguous,
//    targets int64.
// Shapes are the callers' to check (the entry points refuse mismatches).
enum class FusedOp { kSwiGlu, kRmsNorm, kNextTokenLoss };
KernelPath PathFor(FusedOp op, std::initializer_list<TensorKind> tensors, bool cuda_kernels);

// Whether this build has the CUDA kernels (model/cuda).
bool HasCudaKernels();

struct SwiGluKernels {
  KernelPath path;
  // silu(a) * b, and its gradients {da, db} for g: (N) each (kernels.h, model/cuda/kernels.h).
  torch::Tensor (*forward)(const torch::Tensor& a, const torch::Tensor& b);
  std::pair<torch::Tensor, torch::Tensor> (*backward)(const torch::Tensor& g,
                                                      const torch::Tensor& a,
                                                      const torch::Tensor& b);
};
// Null: the composite silu(a) * b.
const SwiGluKernels* SwiGluKernelsFor(const torch::Tensor& a, const torch::Tensor& b);

struct RmsNormKernels {
  KernelPath path;
  // {y (..., D), inv (...)} for x (..., D), w (D); {dx, dw} for dy.
  std::pair<torch::Tensor, torch::Tensor> (*forward)(const torch::Tensor& x, const torch::Tensor& w,
                                                     double eps);
  std::pair<torch::Tensor, torch::Tensor> (*backward)(const torch::Tensor& dy,
                                                      const torch::Tensor& x,
                                                      const torch::Tensor& inv,
                                                      const torch::Tensor& w);
};
// Null: rms_norm.cc's node over ATen operations.
const RmsNormKernels* RmsNormKernelsFor(const torch::Tensor& x, const torch::Tensor& w);

struct NextTokenLossKernels {
  KernelPath path;
  // {loss (), lse (N)} for logits (N, V), targets (N); dlogits (N, V) for the loss's grad.
  std::pair<torch::Tensor, torch::Tensor> (*forward)(const torch::Tensor& logits,
                                                     const torch::Tensor& targets);
  torch::Tensor (*backward)(const torch::Tensor& grad, const torch::Tensor& logits,
                            const torch::Tensor& targets, const torch::Tensor& lse);
};
// Null: log_softmax in float32 and a gather.
const NextTokenLossKernels* NextTokenLossKernelsFor(const torch::Tensor& logits,
                                                    const torch::Tensor& targets);

// CPU kernels only (model/cpu/kernels.h, flash_attention.h): whether these calls take them.
bool RopeOnCpu(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);
// The router's one-pass scores and gather (router.h): x (B, T, D), the norm's gain, w.
bool RouterOnCpu(const torch::Tensor& x, const torch::Tensor& gain, const torch::Tensor& w);
// The routed rows' one-pass update (routed_rows.h): x (N, D) and the updates (u2, p may be
// undefined), once converted to x's dtype.
bool RoutedRowsOnCpu(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& u1,
                     const torch::Tensor& u2, const torch::Tensor& p);
// Plain causal attention on the CPU's tiled kernel (cpu/flash_attention.h): the q
// (B, T, H, E) and k, v (B, T, G, E) it takes for this call — as they are, or, for bfloat16
// ones on a processor without AMX, float32 copies (the result is then converted back) — or
// nothing (at::scaled_dot_product_attention).
std::optional<std::array<torch::Tensor, 3>> CpuCausalAttentionInputs(const torch::Tensor& q,
                                                                     const torch::Tensor& k,
                                                                     const torch::Tensor& v);

// A table kept by an autograd node between its forward and its backward (saved_data holds
// IValues): the tables are constants of kernel_choice.cc, alive for the whole process.
template <typename Table>
c10::IValue SaveKernels(const Table* table) {
  return reinterpret_cast<int64_t>(table);
}
template <typename Table>
const Table* SavedKernels(const c10::IValue& saved) {
  return reinterpret_cast<const Table*>(saved.toInt());
}

// While one lives, every choice above is the composite (KernelPath::kComposite, false,
// nothing).
class ScopedCompositeKernels {
 public:
  ScopedCompositeKernels();
  ~ScopedCompositeKernels();
  ScopedCompositeKernels(const ScopedCompositeKernels&) = delete;
  ScopedCompositeKernels& operator=(const ScopedCompositeKernels&) = delete;
};

}  // namespace xmod

#endif  // XMOD_MODEL_KERNEL_CHOICE_H_
