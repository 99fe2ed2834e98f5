// Token router: see router.h.
#include "model/router.h"

#include <torch/csrc/autograd/custom_function.h>

#include <tuple>

#include "model/cpu/kernels.h"
#include "model/kernel_choice.h"

namespace xmod {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// {inv (B, T), s (B, T)}: s = inv * (x . (g * w)), one reduction and one matrix-vector product
// over x (B, T, D), in the inputs' float32 also under bf16 autocast (top-k ties and the gate
// need the bits).
std::pair<torch::Tensor, torch::Tensor> Scores(const torch::Tensor& x, const torch::Tensor& gain,
                                               const torch::Tensor& w, double eps) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  torch::Tensor inv = InverseRms(x, eps).view({b, t});                               // (B, T)
  torch::Tensor s = at::mv(x.reshape({b * t, d}), gain * w).view({b, t}).mul_(inv);  // (B, T)
  return {inv, s};
}

// dx's router term per row, alpha c + beta x with c = g * w: alpha = a_gate, beta = -a_gate * s
// * inv / D; and {dg, dw} from x^T a, for a = {a_gate, a_loss} (B, T, 2) = ds * inv.
struct ScoreGrads {
  torch::Tensor alpha, beta;  // (B, T, 1)
  torch::Tensor dgain, dw;    // (D)
};
ScoreGrads ScoreBackward(const torch::Tensor& x, const torch::Tensor& gain, const torch::Tensor& w,
                         const torch::Tensor& inv, const torch::Tensor& s,
                         const torch::Tensor& ds_gate, const torch::Tensor& ds_loss) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const int64_t d = x.size(2);
  auto or_zeros = [&](const torch::Tensor& g) { return g.defined() ? g : torch::zeros_like(s); };
  torch::Tensor a =
      torch::stack({or_zeros(ds_gate), or_zeros(ds_loss)}, /*dim=*/-1).mul_(inv.unsqueeze(-1));
  torch::Tensor dc = at::mm(x.reshape({-1, d}).t(), a.view({-1, 2}));  // (D, 2) x^T a
  torch::Tensor alpha = a.narrow(-1, 0, 1);                            // (B, T, 1)
  torch::Tensor beta = alpha * (s * inv).unsqueeze(-1) * (-1.0 / static_cast<double>(d));
  return {alpha, beta, dc.select(1, 0) * w, dc.sum(/*dim=*/1) * gain};
}

// s = w^T RMSNorm(x) = inv * (x . (g * w)) with g the norm's gain, returned twice: {s for the
// gate, trained through x, g and w; s for the router loss, trained through w only (B.7: p
// reads h.detach())}. h = RMSNorm(x) over all T tokens is never formed: forward is one
// reduction and one matrix-vector product over x, backward one rank-1 product, one
// multiply-add and one matrix product. With c = g * w and a = ds * inv per token:
//   dx = a_gate c - (a_gate * s * inv / D) x,
//   dg = (x^T a_gate) * w,   dw = (x^T (a_gate + a_loss)) * g.
class RouterScoreFunction : public torch::autograd::Function<RouterScoreFunction> {
 public:
  // x: (B, T, D), gain g: (D), w: (D) -> {(B, T), (B, T)}.
  static variable_list forward(AutogradContext* actx, const torch::Tensor& x,
                               const torch::Tensor& gain, const torch::Tensor& w, double eps) {
    auto [inv, s] = Scores(x, gain, w, eps);
    actx->save_for_backward({x, gain, w, inv, s});
    return {s, s.clone()};
  }

  static variable_list backward(AutogradContext* actx, variable_list grads) {
    const variable_list saved = actx->get_saved_variables();
    const torch::Tensor &x = saved[0], &gain = saved[1], &w = saved[2];
    ScoreGrads g = ScoreBackward(x, gain, w, saved[3], saved[4], grads[0], grads[1]);
    torch::Tensor dx = g.alpha * (gain * w);  // (B, T, D)
    dx.addcmul_(x, g.beta);
    return {dx, g.dgain, g.dw, torch::Tensor()};
  }
};

// The same scores on float and double CPU tensors, computed (cpu::RouterScores, one pass over
// x) before the selection and handed in, in one node with the gather of the selected rows and
// x passed on for the residual update (routed_rows.h): {s, s, x[rows], x}. The gradient of x
// from all four is one pass (cpu::GatherRowsBackward):
//   dx = g_pass + g_rows scattered to rows + alpha c + beta x.
class RouterScoreGatherFunction : public torch::autograd::Function<RouterScoreGatherFunction> {
 public:
  // x: (B, T, D), gain, w: (D), inv, s: (B, T), rows: (M), pos: (B*T) from cpu::RowPositions
  // -> {(B, T), (B, T), (M, D), (B, T, D)}.
  static variable_list forward(AutogradContext* actx, const torch::Tensor& x,
                               const torch::Tensor& gain, const torch::Tensor& w,
                               const torch::Tensor& inv, const torch::Tensor& s,
                               const torch::Tensor& rows, const torch::Tensor& pos) {
    actx->set_materialize_grads(false);
    actx->save_for_backward({x, gain, w, inv, s});
    actx->saved_data["pos"] = pos;
    const int64_t d = x.size(2);
    return {s, s.clone(), x.reshape({-1, d}).index_select(/*dim=*/0, rows), x};
  }

  static variable_list backward(AutogradContext* actx, variable_list grads) {
    const variable_list saved = actx->get_saved_variables();
    const torch::Tensor &x = saved[0], &gain = saved[1], &w = saved[2];
    const torch::Dtype dtype = x.scalar_type();
    auto as_x = [&](const torch::Tensor& g) { return g.defined() ? g.to(dtype) : g; };
    cpu::RowAffine router;
    torch::Tensor dgain, dw;
    if (grads[0].defined() || grads[1].defined()) {
      ScoreGrads g = ScoreBackward(x, gain, w, saved[3], saved[4], grads[0], grads[1]);
      if (grads[0].defined()) router = {g.alpha, g.beta, gain * w, x};
      dgain = grads[0].defined() ? g.dgain : torch::Tensor();
      dw = g.dw;
    }
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
    torch::Tensor dx = cpu::GatherRowsBackward(
        as_x(grads[3]), as_x(grads[2]), actx->saved_data["pos"].toTensor(), router, d, dtype);
    return {dx.view({b, t, d}), dgain, dw, {}, {}, {}, {}};
  }
};

// Fills sel's masks, index, valid and rows from z = s - tau*b (B, T), without a graph.
void Select(const torch::Tensor& z, int64_t k, RoutingMode mode, Selection* sel) {
  torch::NoGradGuard no_grad;
  const int64_t b = z.size(0), t = z.size(1);
  // Unsorted: the set is the same, and it is put into sequence order below anyway.
  torch::Tensor top =
      std::get<1>(z.topk(k, /*dim=*/1, /*largest=*/true, /*sorted=*/false));  // (B, k)
  sel->topk_mask = torch::zeros({b, t}, z.options().dtype(torch::kBool)).scatter_(1, top, true);
  sel->threshold_mask = torch::sigmoid(z) > 0.5;
  if (mode == RoutingMode::kTopK) {
    sel->mask = sel->topk_mask;
    sel->index = std::get<0>(top.sort(/*dim=*/1));  // (B, k) sequence order
  } else {
    sel->mask = sel->threshold_mask;
    torch::Tensor counts = sel->mask.sum(/*dim=*/1);  // (B)
    const int64_t kmax = counts.max().item<int64_t>();
    // Selected positions first (in order), then the unselected ones as padding.
    torch::Tensor arange = torch::arange(t, z.options().dtype(torch::kLong));
    torch::Tensor key = sel->mask.logical_not().to(torch::kLong) * t + arange;  // (B, T)
    sel->index = std::get<1>(key.sort(/*dim=*/1)).narrow(1, 0, kmax);           // (B, kmax)
    sel->valid = arange.narrow(0, 0, kmax).unsqueeze(0) < counts.unsqueeze(1);  // (B, kmax)
  }
  // Flat row of (b, i) in x (B*T, D) is b*T + i.
  torch::Tensor offsets = torch::arange(b, sel->index.options()).mul(t).unsqueeze(1);  // (B, 1)
  sel->rows = (sel->index + offsets).reshape({-1});                                    // (B*k)
}

}  // namespace

RouterImpl::RouterImpl(int64_t d_model, double tau, double init_std) : tau_(tau) {
  weight = register_parameter("weight", torch::randn({d_model}) * init_std);
}

Selection RouterImpl::forward(const torch::Tensor& x, const RMSNormImpl& norm,
                              const torch::Tensor& bias, int64_t k, RoutingMode mode) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  Selection sel;
  const torch::Tensor tau_bias = tau_ * bias;  // (B, T)
  torch::Tensor s, s_loss;                     // (B, T) the scores for the gate and the loss
  if (RouterOnCpu(x, norm.weight, weight)) {
    torch::Tensor inv, s0;  // (B, T)
    {
      torch::NoGradGuard no_grad;
      std::tie(inv, s0) = cpu::RouterScores(x, norm.weight * weight, norm.eps());  // one pass
    }
    Select(s0 - tau_bias, k, mode, &sel);
    const torch::Tensor pos = cpu::RowPositions(sel.rows, b * t);  // rows are distinct
    const variable_list out =
        RouterScoreGatherFunction::apply(x, norm.weight, weight, inv, s0, sel.rows, pos);
    s = out[0], s_loss = out[1];
    sel.x_rows = out[2];                      // (B*k, D)
    sel.x_pass = out[3].reshape({b * t, d});  // (B*T, D)
  } else {                                    // the composite: CUDA, bf16
    const variable_list scores = RouterScoreFunction::apply(x, norm.weight, weight, norm.eps());
    s = scores[0], s_loss = scores[1];
    Select(s.detach() - tau_bias, k, mode, &sel);
    sel.x_pass = x.reshape({b * t, d});
    sel.x_rows = sel.x_pass.index_select(/*dim=*/0, sel.rows);
  }
  torch::Tensor r = torch::sigmoid(s - tau_bias);  // (B, T)
  sel.gate = r.gather(/*dim=*/1, sel.index);       // (B, k)
  if (sel.valid.defined()) sel.gate = sel.gate * sel.valid;

  // B.7 router loss: p from detached inputs, q = top-k membership.
  torch::Tensor logit_p = s_loss - tau_bias;  // (B, T)
  sel.aux_loss =
      torch::binary_cross_entropy_with_logits(logit_p, sel.topk_mask.to(logit_p.scalar_type()));
  return sel;
}

}  // namespace xmod
