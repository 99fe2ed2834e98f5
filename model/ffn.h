// SwiGLU feed-forward network (Shazeer 2020), three matrices (paper B.1, Table 4 "FFN dim"):
// f(x) = W2 (silu(W1 x) * W3 x). Also the expert of the MoE layer (width d_e).
// Legend: N = rows (tokens), D = d_model, F = intermediate width. Thread-compatible.
#ifndef XMOD_MODEL_FFN_H_
#define XMOD_MODEL_FFN_H_

#include <torch/torch.h>

namespace xmod {

// The gate silu(a) * b of f(x): a = W1 x, b = W3 x, (..., F) -> (..., F). One autograd node
// over the single-pass kernels kernel_choice.h picks (model/cpu's; model/cuda's on CUDA), the
// ATen composite where there are none.
torch::Tensor SwiGluGate(const torch::Tensor& a, const torch::Tensor& b);

class SwiGluImpl : public torch::nn::Module {
 public:
  SwiGluImpl(int64_t d_model, int64_t hidden);

  // x: (..., D) -> (..., D).
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear w1{nullptr};  // gate, D -> F
  torch::nn::Linear w3{nullptr};  // up, D -> F
  torch::nn::Linear w2{nullptr};  // down, F -> D
};
TORCH_MODULE(SwiGlu);

}  // namespace xmod

#endif  // XMOD_MODEL_FFN_H_
