// RMSNorm (Zhang & Sennrich, 2019): y = x / sqrt(mean(x^2) + eps) * g, the pre-norm of every
// attention and FFN sublayer and the final norm (paper B.1, Qwen3-style backbones). One
// autograd node with a hand-written backward (rms_norm.cc): over the single-pass row kernels
// kernel_choice.h picks (model/cpu's for float and double CPU tensors, model/cuda's on CUDA),
// over ATen ops where there are none.
// Legend: D = d_model. Thread-compatible.
#ifndef XMOD_MODEL_RMS_NORM_H_
#define XMOD_MODEL_RMS_NORM_H_

#include <torch/torch.h>

namespace xmod {

// inv = (mean over D of x^2 + eps)^(-1/2): x (..., D) -> (..., 1), one reduction over x.
torch::Tensor InverseRms(const torch::Tensor& x, double eps);

class RMSNormImpl : public torch::nn::Module {
 public:
  explicit RMSNormImpl(int64_t dim, double eps = 1e-6);

  // x: (..., D) -> (..., D), normalized over the last dimension.
  torch::Tensor forward(const torch::Tensor& x);

  double eps() const { return eps_; }

  torch::Tensor weight;  // (D) gain g, initialised to 1

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

}  // namespace xmod

#endif  // XMOD_MODEL_RMS_NORM_H_
