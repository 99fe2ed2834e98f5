// Token router: see router.h.
#include "model/router.h"

namespace xmod {

RouterImpl::RouterImpl(int64_t d_model, double tau, double init_std) : tau_(tau) {
  weight = register_parameter("weight", torch::randn({d_model}) * init_std);
}

Selection RouterImpl::forward(const torch::Tensor& h, const torch::Tensor& bias, int64_t k,
                              RoutingMode mode) {
  const int64_t b = h.size(0), t = h.size(1);
  Selection sel;
  // Scores as a product and a sum rather than a matrix product, so that they stay in the
  // residual stream's float32 under bf16 autocast: top-k ties and the gate need the bits.
  torch::Tensor z = (h * weight).sum(/*dim=*/-1) - tau_ * bias;  // (B, T) s - tau*b
  torch::Tensor r = torch::sigmoid(z);                           // (B, T)
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
  torch::Tensor logit_p = (h.detach() * weight).sum(/*dim=*/-1) - tau_ * bias;  // (B, T)
  sel.aux_loss =
      torch::binary_cross_entropy_with_logits(logit_p, sel.topk_mask.to(logit_p.scalar_type()));
  return sel;
}

}  // namespace xmod
