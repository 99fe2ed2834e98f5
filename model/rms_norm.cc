// RMSNorm: see rms_norm.h.
#include "model/rms_norm.h"

#include <torch/csrc/autograd/custom_function.h>

#include "model/kernel_choice.h"

namespace xmod {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// y = xhat * g with xhat = x * inv, inv = (mean(x^2) + eps)^(-1/2), as one autograd node.
// Backward (m = mean over D of dy * g * xhat, per row):
//   dx = inv * (dy * g - xhat * m)
//   dg = sum over rows of dy * xhat
// Saves xhat and inv only: three passes over (N, D) forward, six backward, where the
// autograd of pow / mean / rsqrt / mul / mul takes about twice as many.
class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  static torch::Tensor forward(AutogradContext* actx, const torch::Tensor& x,
                               const torch::Tensor& weight, double eps) {
    torch::Tensor inv = InverseRms(x, eps);  // (..., 1)
    torch::Tensor xhat = x * inv;            // (..., D)
    actx->save_for_backward({xhat, inv, weight});
    actx->saved_data["x_dtype"] = x.scalar_type();
    return xhat * weight;  // (..., D)
  }

  static variable_list backward(AutogradContext* actx, variable_list grads) {
    const variable_list saved = actx->get_saved_variables();
    const torch::Tensor &xhat = saved[0], &inv = saved[1], &weight = saved[2];
    const torch::Tensor& dy = grads[0];  // (..., D)
    const int64_t d = xhat.size(-1);
    torch::Tensor dy_xhat = (dy * xhat).reshape({-1, d});                     // (N, D)
    torch::Tensor dweight = dy_xhat.sum(/*dim=*/0).to(weight.scalar_type());  // (D)
    torch::Tensor m;                                                          // (..., 1)
    {
      // A matrix-vector product in the gradients' dtype, also inside an autocast region.
      c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
      m = at::mv(dy_xhat, weight.to(dy_xhat.scalar_type())).div_(d).view(inv.sizes());
    }
    torch::Tensor dx = dy * weight;  // (..., D)
    dx.addcmul_(xhat, m, /*value=*/-1).mul_(inv);
    const torch::Dtype x_dtype = actx->saved_data["x_dtype"].toScalarType();
    return {dx.to(x_dtype), dweight, torch::Tensor()};
  }
};

// The same node over the single-pass row kernels of kernel_choice.h's table (model/cpu for
// float and double CPU tensors, model/cuda for CUDA ones): forward reads x once and writes y,
// backward reads dy and x once and writes dx (dw from per-block partial sums). Saves x and inv
// (where the composite node saves xhat and inv).
class RmsNormKernelFunction : public torch::autograd::Function<RmsNormKernelFunction> {
 public:
  static torch::Tensor forward(AutogradContext* actx, const torch::Tensor& x,
                               const torch::Tensor& weight, double eps,
                               const RmsNormKernels* kernels) {
    auto [y, inv] = kernels->forward(x, weight, eps);  // (..., D), (...)
    actx->save_for_backward({x, inv, weight});
    actx->saved_data["kernels"] = SaveKernels(kernels);
    return y;
  }

  static variable_list backward(AutogradContext* actx, variable_list grads) {
    const variable_list saved = actx->get_saved_variables();
    const torch::Tensor &x = saved[0], &inv = saved[1], &weight = saved[2];
    const auto* kernels = SavedKernels<RmsNormKernels>(actx->saved_data["kernels"]);
    // grads[0] has y's dtype: x's on the CPU, float32 on CUDA (kernel_choice.h).
    auto [dx, dweight] = kernels->backward(grads[0], x, inv, weight);
    return {dx, dweight, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor InverseRms(const torch::Tensor& x, double eps) {
  // ||x||^2 / D in one reduction; the (..., 1) arithmetic after it is negligible.
  torch::Tensor norm = at::linalg_vector_norm(x, 2, /*dim=*/{-1}, /*keepdim=*/true);
  return torch::rsqrt(norm.square_().div_(x.size(-1)).add_(eps));
}

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  if (const RmsNormKernels* kernels = RmsNormKernelsFor(x, weight)) {
    return RmsNormKernelFunction::apply(x, weight, eps_, kernels);  // (..., D)
  }
  return RmsNormFunction::apply(x, weight, eps_);  // (..., D): the composite
}

}  // namespace xmod
