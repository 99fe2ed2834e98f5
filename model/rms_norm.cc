// RMSNorm: see rms_norm.h.
#include "model/rms_norm.h"

namespace xmod {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  torch::Tensor inv_rms = torch::rsqrt(x.pow(2).mean(/*dim=*/-1, /*keepdim=*/true) + eps_);
  return x * inv_rms * weight;  // (..., D)
}

}  // namespace xmod
