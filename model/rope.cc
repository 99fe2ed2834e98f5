// Rotary position embedding: see rope.h.
#include "model/rope.h"

#include <cmath>

namespace xmod {

Rope::Rope(int64_t head_dim, int64_t max_positions, double theta, torch::Device device,
           torch::Dtype dtype) {
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
  const int64_t half = x.size(-1) / 2;
  torch::Tensor x1 = x.narrow(-1, 0, half);     // (B, T, H, E/2)
  torch::Tensor x2 = x.narrow(-1, half, half);  // (B, T, H, E/2)
  const torch::Tensor& cos = tables.first;
  const torch::Tensor& sin = tables.second;
  return torch::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, /*dim=*/-1);
}

}  // namespace xmod
