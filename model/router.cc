// Token router: see router.h.
#include "model/router.h"

#include <torch/csrc/autograd/custom_function.h>

namespace xmod {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

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
    // In the inputs' float32 also under bf16 autocast: top-k ties and the gate need the bits.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
    torch::Tensor inv = InverseRms(x, eps).view({b, t});                               // (B, T)
    torch::Tensor s = at::mv(x.reshape({b * t, d}), gain * w).view({b, t}).mul_(inv);  // (B, T)
    actx->save_for_backward({x, gain, w, inv, s});
    return {s, s.clone()};
  }

  static variable_list backward(AutogradContext* actx, variable_list grads) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const variable_list saved = actx->get_saved_variables();
    const torch::Tensor &x = saved[0], &gain = saved[1], &w = saved[2], &inv = saved[3],
                        &s = saved[4];
    const int64_t d = x.size(2);
    auto or_zeros = [&](const torch::Tensor& g) { return g.defined() ? g : torch::zeros_like(s); };
    // a = ds * inv of the gate and the loss path, (B, T, 2).
    torch::Tensor a =
        torch::stack({or_zeros(grads[0]), or_zeros(grads[1])}, /*dim=*/-1).mul_(inv.unsqueeze(-1));
    torch::Tensor dc = at::mm(x.reshape({-1, d}).t(), a.view({-1, 2}));  // (D, 2) x^T a
    torch::Tensor a_gate = a.narrow(-1, 0, 1);                           // (B, T, 1)
    torch::Tensor dx = a_gate * (gain * w);                              // (B, T, D)
    dx.addcmul_(x, a_gate * (s * inv).unsqueeze(-1), -1.0 / static_cast<double>(d));
    return {dx, dc.select(1, 0) * w, dc.sum(/*dim=*/1) * gain, torch::Tensor()};
  }
};

}  // namespace

RouterImpl::RouterImpl(int64_t d_model, double tau, double init_std) : tau_(tau) {
  weight = register_parameter("weight", torch::randn({d_model}) * init_std);
}

Selection RouterImpl::forward(const torch::Tensor& x, const RMSNormImpl& norm,
                              const torch::Tensor& bias, int64_t k, RoutingMode mode) {
  const int64_t b = x.size(0), t = x.size(1);
  Selection sel;
  const variable_list scores =
      RouterScoreFunction::apply(x, norm.weight, weight, norm.eps());  // (B, T) s, twice
  const torch::Tensor tau_bias = tau_ * bias;                          // (B, T)
  torch::Tensor z = scores[0] - tau_bias;                              // (B, T) s - tau*b
  torch::Tensor r = torch::sigmoid(z);                                 // (B, T)
  {
    torch::NoGradGuard no_grad;
    // Unsorted: the set is the same, and it is put into sequence order below anyway.
    torch::Tensor top =
        std::get<1>(z.topk(k, /*dim=*/1, /*largest=*/true, /*sorted=*/false));  // (B, k)
    sel.topk_mask = torch::zeros({b, t}, x.options().dtype(torch::kBool)).scatter_(1, top, true);
    sel.threshold_mask = r > 0.5;
    if (mode == RoutingMode::kTopK) {
      sel.mask = sel.topk_mask;
      sel.index = std::get<0>(top.sort(/*dim=*/1));  // (B, k) sequence order
    } else {
      sel.mask = sel.threshold_mask;
      torch::Tensor counts = sel.mask.sum(/*dim=*/1);  // (B)
      const int64_t kmax = counts.max().item<int64_t>();
      // Selected positions first (in order), then the unselected ones as padding.
      torch::Tensor arange = torch::arange(t, x.options().dtype(torch::kLong));
      torch::Tensor key = sel.mask.logical_not().to(torch::kLong) * t + arange;  // (B, T)
      sel.index = std::get<1>(key.sort(/*dim=*/1)).narrow(1, 0, kmax);           // (B, kmax)
      sel.valid = arange.narrow(0, 0, kmax).unsqueeze(0) < counts.unsqueeze(1);  // (B, kmax)
    }
  }
  sel.gate = r.gather(/*dim=*/1, sel.index);  // (B, k)
  if (sel.valid.defined()) sel.gate = sel.gate * sel.valid;

  // B.7 router loss: p from detached inputs, q = top-k membership.
  torch::Tensor logit_p = scores[1] - tau_bias;  // (B, T)
  sel.aux_loss =
      torch::binary_cross_entropy_with_logits(logit_p, sel.topk_mask.to(logit_p.scalar_type()));
  return sel;
}

}  // namespace xmod
