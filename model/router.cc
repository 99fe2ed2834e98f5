// Token router: see router.h.
#include "model/router.h"

#include <torch/csrc/autograd/custom_function.h>

namespace xmod {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// s = h w, returned twice: {s for the gate, trained through h and w; s for the router loss,
// trained through w only (B.7: p reads h.detach())}. One matrix-vector product forward and
// one rank-1 product and one matrix-vector product backward, where (h * w).sum(-1) and its
// detached copy took a product, a sum and their autograd each.
class RouterScoreFunction : public torch::autograd::Function<RouterScoreFunction> {
 public:
  // h: (B, T, D), w: (D) -> {(B, T), (B, T)}.
  static variable_list forward(AutogradContext* actx, const torch::Tensor& h,
                               const torch::Tensor& w) {
    actx->save_for_backward({h, w});
    // In the inputs' float32 also under bf16 autocast: top-k ties and the gate need the bits.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    torch::Tensor s = at::mv(h.reshape({-1, h.size(-1)}), w).view({h.size(0), h.size(1)});
    return {s, s.clone()};
  }

  static variable_list backward(AutogradContext* actx, variable_list grads) {
    const variable_list saved = actx->get_saved_variables();
    const torch::Tensor &h = saved[0], &w = saved[1];
    const torch::Tensor& gate_grad = grads[0];  // (B, T), or undefined
    const torch::Tensor& loss_grad = grads[1];  // (B, T), or undefined
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    torch::Tensor dh, dw;
    torch::Tensor gw = gate_grad.defined() && loss_grad.defined() ? gate_grad + loss_grad
                       : gate_grad.defined()                      ? gate_grad
                                                                  : loss_grad;
    if (gw.defined()) dw = at::mv(h.reshape({-1, h.size(-1)}).t(), gw.reshape({-1}));  // (D)
    if (gate_grad.defined()) dh = gate_grad.unsqueeze(-1) * w;                         // (B, T, D)
    return {dh, dw};
  }
};

}  // namespace

RouterImpl::RouterImpl(int64_t d_model, double tau, double init_std) : tau_(tau) {
  weight = register_parameter("weight", torch::randn({d_model}) * init_std);
}

Selection RouterImpl::forward(const torch::Tensor& h, const torch::Tensor& bias, int64_t k,
                              RoutingMode mode) {
  const int64_t b = h.size(0), t = h.size(1);
  Selection sel;
  const variable_list scores = RouterScoreFunction::apply(h, weight);  // (B, T) s, twice
  const torch::Tensor tau_bias = tau_ * bias;                          // (B, T)
  torch::Tensor z = scores[0] - tau_bias;                              // (B, T) s - tau*b
  torch::Tensor r = torch::sigmoid(z);                                 // (B, T)
  {
    torch::NoGradGuard no_grad;
    torch::Tensor top = std::get<1>(z.topk(k, /*dim=*/1));  // (B, k)
    sel.topk_mask = torch::zeros({b, t}, h.options().dtype(torch::kBool)).scatter_(1, top, true);
    sel.threshold_mask = r > 0.5;
    if (mode == RoutingMode::kTopK) {
      sel.mask = sel.topk_mask;
      sel.index = std::get<0>(top.sort(/*dim=*/1));  // (B, k) sequence order
    } else {
      sel.mask = sel.threshold_mask;
      torch::Tensor counts = sel.mask.sum(/*dim=*/1);  // (B)
      const int64_t kmax = counts.max().item<int64_t>();
      // Selected positions first (in order), then the unselected ones as padding.
      torch::Tensor arange = torch::arange(t, h.options().dtype(torch::kLong));
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
