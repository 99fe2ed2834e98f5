// SwiGLU feed-forward network: see ffn.h.
#include "model/ffn.h"

namespace xmod {

SwiGluImpl::SwiGluImpl(int64_t d_model, int64_t hidden) {
  auto linear = [](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
  };
  w1 = register_module("w1", linear(d_model, hidden));
  w3 = register_module("w3", linear(d_model, hidden));
  w2 = register_module("w2", linear(hidden, d_model));
}

torch::Tensor SwiGluImpl::forward(const torch::Tensor& x) {
  return w2->forward(torch::silu(w1->forward(x)) * w3->forward(x));  // (..., D)
}

}  // namespace xmod
