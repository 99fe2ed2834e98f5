// SwiGLU feed-forward network: see ffn.h.
#include "model/ffn.h"

#include <torch/csrc/autograd/custom_function.h>

#include "model/kernel_choice.h"

namespace xmod {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// silu(a) * b as one autograd node over the single-pass kernels of kernel_choice.h's table
// (model/cpu or model/cuda): forward reads a and b once and writes the product, backward reads
// g, a, b once and writes da and db. The composite (silu, mul and their backward: 2 passes
// forward, 3 backward) also keeps silu(a) for the product's backward; this node keeps only a
// and b, which the products keep anyway.
class SwiGluGateFunction : public torch::autograd::Function<SwiGluGateFunction> {
 public:
  // a, b: (..., F) -> (..., F).
  static torch::Tensor forward(AutogradContext* actx, const torch::Tensor& a,
                               const torch::Tensor& b, const SwiGluKernels* kernels) {
    actx->save_for_backward({a, b});
    actx->saved_data["kernels"] = SaveKernels(kernels);
    return kernels->forward(a, b);
  }

  static variable_list backward(AutogradContext* actx, variable_list grads) {
    const variable_list saved = actx->get_saved_variables();
    const torch::Tensor &a = saved[0], &b = saved[1];
    const auto* kernels = SavedKernels<SwiGluKernels>(actx->saved_data["kernels"]);
    auto [da, db] = kernels->backward(grads[0].to(a.scalar_type()), a, b);
    return {da, db, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor SwiGluGate(const torch::Tensor& a, const torch::Tensor& b) {
  const SwiGluKernels* kernels = SwiGluKernelsFor(a, b);
  if (kernels != nullptr && a.sizes() == b.sizes()) return SwiGluGateFunction::apply(a, b, kernels);
  return torch::silu(a) * b;  // the composite
}

SwiGluImpl::SwiGluImpl(int64_t d_model, int64_t hidden) {
  auto linear = [](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
  };
  w1 = register_module("w1", linear(d_model, hidden));
  w3 = register_module("w3", linear(d_model, hidden));
  w2 = register_module("w2", linear(hidden, d_model));
}

torch::Tensor SwiGluImpl::forward(const torch::Tensor& x) {
  return w2->forward(SwiGluGate(w1->forward(x), w3->forward(x)));  // (..., D)
}

}  // namespace xmod
