// Rotary position embedding: see rope.h.
#include "model/rope.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cmath>

#include "model/cpu/kernels.h"
#include "model/kernel_choice.h"

namespace xmod {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// (x1 * cos - x2 * sin, x2 * cos + x1 * sin) of the halves x1, x2 of x (B, T, H, E), contiguous
// (B, T, H, E); with sin negated this is the inverse rotation. On CPU model/cpu/kernels.h's
// single pass (which reads x's rows where the fused q/k/v product left them, without a copy),
// in x's type: float/double, or bfloat16 x of bf16 autocast with float32 tables, computed in
// float32 and rounded once, as attention's products take it. Elsewhere a multiply and a fused
// multiply-add per half into the halves of the result (in the result type of x and the
// tables), no temporaries.
torch::Tensor Rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                     double sin_sign) {
  if (RopeOnCpu(x, cos, sin)) return cpu::Rope(x, cos, sin, sin_sign);
  torch::Tensor out = torch::empty(x.sizes(), x.options().dtype(at::result_type(x, cos)));
  const int64_t half = x.size(-1) / 2;
  torch::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);  // (B, T, H, E/2)
  torch::Tensor out1 = out.narrow(-1, 0, half), out2 = out.narrow(-1, half, half);
  at::mul_out(out1, x1, cos).addcmul_(x2, sin, -sin_sign);
  at::mul_out(out2, x2, cos).addcmul_(x1, sin, sin_sign);
  return out;
}

// The rotation as one autograd node: the backward of an orthogonal map is its transpose,
// the rotation by -angle, so only the tables are saved. Replaces the 4 mul, 2 add and cat of
// the plain formula and their autograd (which also fills and copies the halves' gradients).
class RopeFunction : public torch::autograd::Function<RopeFunction> {
 public:
  // x: (B, T, H, E); cos, sin: (B or 1, T, 1, E/2). Returns (B, T, H, E) contiguous.
  static torch::Tensor forward(AutogradContext* actx, const torch::Tensor& x,
                               const torch::Tensor& cos, const torch::Tensor& sin) {
    actx->save_for_backward({cos, sin});
    return Rotate(x, cos, sin, 1.0);
  }

  static variable_list backward(AutogradContext* actx, variable_list grads) {
    const variable_list saved = actx->get_saved_variables();
    const torch::Tensor& grad = grads[0];  // (B, T, H, E)
    return {Rotate(grad, saved[0], saved[1], -1.0), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

Rope::Rope(int64_t head_dim, int64_t max_positions, double theta, torch::Device device,
           torch::Dtype dtype)
    : theta_(theta) {
  TORCH_CHECK(head_dim % 2 == 0, "RoPE needs an even head_dim, got ", head_dim);
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  // inv_freq_i = theta^(-2i/E), i = 0..E/2-1.
  torch::Tensor inv_freq =
      torch::pow(theta, -torch::arange(0, head_dim, 2, f64) / static_cast<double>(head_dim));
  torch::Tensor pos = torch::arange(max_positions, f64);
  torch::Tensor angle = torch::outer(pos, inv_freq);  // (P, E/2)
  cos_ = angle.cos().to(device, dtype);
  sin_ = angle.sin().to(device, dtype);
}

std::pair<torch::Tensor, torch::Tensor> Rope::Tables(const torch::Tensor& positions, int64_t t,
                                                     double scale) const {
  torch::Tensor cos, sin;
  if (positions.defined()) {
    const int64_t b = positions.size(0);
    torch::Tensor flat = positions.reshape({-1});
    cos = cos_.index_select(0, flat).view({b, t, 1, -1});  // (B, T, 1, E/2)
    sin = sin_.index_select(0, flat).view({b, t, 1, -1});
  } else {
    TORCH_CHECK(t <= cos_.size(0), "sequence of ", t, " tokens exceeds RoPE table of ",
                cos_.size(0));
    cos = cos_.narrow(0, 0, t).view({1, t, 1, -1});  // (1, T, 1, E/2)
    sin = sin_.narrow(0, 0, t).view({1, t, 1, -1});
  }
  if (scale != 1.0) {
    cos = cos * scale;
    sin = sin * scale;
  }
  return {cos, sin};
}

torch::Tensor Rope::Apply(const torch::Tensor& x,
                          const std::pair<torch::Tensor, torch::Tensor>& tables) {
  return RopeFunction::apply(x, tables.first, tables.second);
}

}  // namespace xmod
