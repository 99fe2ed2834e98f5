// Gradient-norm clipping on the device: see grad_clip.h.
#include "model/train/grad_clip.h"

namespace xmod {

torch::Tensor ClipGradNorm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return torch::Tensor();
  std::vector<torch::Tensor> norms = torch::_foreach_norm(grads, 2);  // () each
  for (torch::Tensor& norm : norms) norm = norm.to(torch::kFloat);
  torch::Tensor total = torch::stack(norms).norm(2);                 // ()
  torch::Tensor scale = (max_norm / (total + 1e-6)).clamp_max(1.0);  // ()
  torch::_foreach_mul_(grads, scale);
  return total;
}

}  // namespace xmod
