// Scaled scatter-add of the routed rows: see routed_rows.h.
#include "model/routed_rows.h"

#include <torch/csrc/autograd/custom_function.h>

#include <optional>

#include "model/cpu/kernels.h"
#include "model/kernel_choice.h"

namespace xmod {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// out = x + (r (u1 + u2) + p) at the rows, one node; backward: dx = g, du1 = du2 = r g[rows],
// dr = g[rows] . (u1 + u2), dp = g[rows], in one pass over the selected rows.
class ScatterScaledAddFunction : public torch::autograd::Function<ScatterScaledAddFunction> {
 public:
  // x: (N, D), rows: (M), pos: (N), r: (M), u1: (M, D), u2, p: (M, D) or none -> (N, D).
  static torch::Tensor forward(AutogradContext* actx, const torch::Tensor& x,
                               const torch::Tensor& rows, const torch::Tensor& pos,
                               const torch::Tensor& r, const torch::Tensor& u1,
                               const std::optional<torch::Tensor>& u2_or_none,
                               const std::optional<torch::Tensor>& p_or_none) {
    actx->set_materialize_grads(false);
    const torch::Tensor u2 = u2_or_none.value_or(torch::Tensor());
    const torch::Tensor p = p_or_none.value_or(torch::Tensor());
    actx->save_for_backward({rows, r, u1, u2});
    actx->saved_data["has_p"] = p.defined();
    actx->saved_data["dtype"] = x.scalar_type();
    return cpu::ScatterScaledAdd(x, pos, r, u1, u2, p);
  }

  static variable_list backward(AutogradContext* actx, variable_list grads) {
    if (!grads[0].defined()) return variable_list(7);
    const variable_list saved = actx->get_saved_variables();
    const torch::Tensor &rows = saved[0], &r = saved[1], &u1 = saved[2], &u2 = saved[3];
    const torch::Tensor g = grads[0].to(actx->saved_data["dtype"].toScalarType());
    auto [du, dr, dp] =
        cpu::ScatterScaledAddBackward(g, rows, r, u1, u2, actx->saved_data["has_p"].toBool());
    return {g, {}, {}, dr, du, u2.defined() ? du : torch::Tensor(), dp};
  }
};

}  // namespace

torch::Tensor ScatterScaledAdd(const torch::Tensor& x, const torch::Tensor& rows,
                               const torch::Tensor& r_in, const torch::Tensor& u1_in,
                               const torch::Tensor& u2_in, const torch::Tensor& p_in) {
  // bf16 autocast on CPU: the residual stream x stays float32 while the block's updates leave
  // their products in bfloat16. The sum is float32 either way (index_add promotes them), so
  // the fused node takes them converted to x's type.
  const bool float_stream = x.device().is_cpu() && x.scalar_type() == torch::kFloat32;
  const auto like_x = [&](const torch::Tensor& t) {
    return float_stream && t.defined() && t.scalar_type() == torch::kBFloat16 ? t.to(x.dtype()) : t;
  };
  const torch::Tensor r = like_x(r_in), u1 = like_x(u1_in), u2 = like_x(u2_in), p = like_x(p_in);
  if (RoutedRowsOnCpu(x, r, u1, u2, p)) {
    const torch::Tensor pos = cpu::RowPositions(rows, x.size(0));  // undefined on repeats
    auto optional = [](const torch::Tensor& t) {
      return t.defined() ? std::optional<torch::Tensor>(t) : std::nullopt;
    };
    if (pos.defined()) {
      return ScatterScaledAddFunction::apply(x, rows, pos, r, u1, optional(u2), optional(p));
    }
  }
  // CUDA, bf16 x, repeated rows: index_add sums every row's contributions.
  torch::Tensor delta = r.unsqueeze(-1) * (u2.defined() ? u1 + u2 : u1);  // (M, D)
  if (p.defined()) delta = delta + p;
  return x.index_add(/*dim=*/0, rows, delta);
}

}  // namespace xmod
