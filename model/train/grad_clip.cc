// Gradient-norm clipping on the device: see grad_clip.h.
#include "model/train/grad_clip.h"

namespace xmod {

torch::Tensor ClipGradNorm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads, norms;
  for (const torch::Tensor& p : parameters) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    norms.push_back(p.grad().norm(2).to(torch::kFloat));  // ()
  }
  if (grads.empty()) return torch::Tensor();
  torch::Tensor total = torch::stack(norms).norm(2);                 // ()
  torch::Tensor scale = (max_norm / (total + 1e-6)).clamp_max(1.0);  // ()
  for (torch::Tensor& g : grads) g.mul_(scale.to(g.scalar_type()));
  return total;
}

}  // namespace xmod
