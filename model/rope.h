// Rotary position embedding (RoPE, Su et al. 2021), base theta given (the backbone's:
// Backbone::rope_theta), "rotate-half" layout:
// dimension i of a head is paired with dimension i + E/2 and rotated by the angle
// pos * theta^(-2i/E). Sparse layers rotate each selected token at its ORIGINAL position in
// the sequence (paper §2.2), so positions are passed explicitly as indices into the table.
// Legend: B = batch, T = tokens in the call, H = heads, E = head_dim, P = max positions.
// Immutable after construction; thread-safe for concurrent reads.
#ifndef XMOD_MODEL_ROPE_H_
#define XMOD_MODEL_ROPE_H_

#include <torch/torch.h>

namespace xmod {

class Rope {
 public:
  Rope() = default;
  // Tables for positions 0..max_positions-1 on `device`, in `dtype`.
  Rope(int64_t head_dim, int64_t max_positions, double theta, torch::Device device,
       torch::Dtype dtype = torch::kFloat32);

  // Per-token tables for x of layout (B, T, H, E). positions: (B, T) int64, or undefined for
  // 0..T-1. Returns {cos, sin}, each (B or 1, T, 1, E/2), multiplied by `scale` (the
  // attention's 1/sqrt(E) can be folded into the query rotation at no cost).
  std::pair<torch::Tensor, torch::Tensor> Tables(const torch::Tensor& positions, int64_t t,
                                                 double scale) const;

  // Rotates x: (B, T, H, E) by tables from Tables(); returns (B, T, H, E) contiguous. One
  // autograd node; its backward is the inverse rotation.
  static torch::Tensor Apply(const torch::Tensor& x,
                             const std::pair<torch::Tensor, torch::Tensor>& tables);

  int64_t max_positions() const { return cos_.defined() ? cos_.size(0) : 0; }
  torch::Device device() const { return cos_.defined() ? cos_.device() : torch::kCPU; }
  torch::Dtype dtype() const { return cos_.defined() ? cos_.scalar_type() : torch::kFloat32; }
  double theta() const { return theta_; }

 private:
  torch::Tensor cos_;  // (P, E/2)
  torch::Tensor sin_;  // (P, E/2)
  double theta_ = 0;   // base frequency
};

}  // namespace xmod

#endif  // XMOD_MODEL_ROPE_H_
