// Mixture-of-Experts FFN, the paper's MoE baseline (B.1 "MoE routing", Table 6 "6:64+2"):
// fine-grained routed SwiGLU experts of width d_e plus always-on shared experts, a softmax
// router choosing the top `active` experts per token, an auxiliary load-balancing loss
// (Switch/Qwen3 form) and auxiliary-loss-free expert biases (DeepSeek-V3 / Kimi style) that
// steer selection only. No capacity limit: every token reaches all of its chosen experts.
//
// Choices we made (documented, configurable through MoESpec):
//  - gates are the router probabilities of the chosen experts, renormalised to sum to 1;
//  - the shared experts are one SwiGLU of width shared * d_e (the sum of `shared` SwiGLUs of
//    width d_e is exactly that, as in DeepSeekMoE's implementation);
//  - balance loss = E * sum_e f_e * P_e, f_e = share of assignments to expert e, P_e = mean
//    router probability of e; returned unweighted per layer;
//  - bias update after each optimizer step: bias_e += rate * sign(mean load - load_e), loads
//    counted over the training forwards since the previous update.
// Dispatch: token-expert pairs are sorted by expert and each expert runs once on its
// contiguous slice; results are weighted and index-added back.
// Legend: B = batch, T = tokens, N = B*T, D = d_model, E = routed experts, k = active.
// Thread-compatible.
#ifndef XMOD_MODEL_MOE_H_
#define XMOD_MODEL_MOE_H_

#include <torch/torch.h>

#include <vector>

#include "model/ffn.h"

namespace xmod {

struct MoEOptions {
  int64_t d_model = 0;
  int64_t expert_dim = 0;      // d_e
  int64_t total_experts = 0;   // E
  int64_t active_experts = 0;  // k
  int64_t shared_experts = 0;
  double bias_update_rate = 1e-3;
};

// The routing decision for N tokens.
struct MoERouting {
  torch::Tensor experts;  // (N, k) int64, chosen experts
  torch::Tensor gates;    // (N, k) float, weights of their outputs (sum 1 per token)
  torch::Tensor probs;    // (N, E) router softmax
};

class MoEImpl : public torch::nn::Module {
 public:
  explicit MoEImpl(const MoEOptions& options);

  // x: (N, D) -> the routing of its rows.
  MoERouting Route(const torch::Tensor& x);

  // x: (B, T, D) -> (B, T, D). Adds this layer's balance loss (unweighted) to
  // *balance_loss when non-null. In training mode counts expert loads for UpdateBias().
  torch::Tensor forward(const torch::Tensor& x, torch::Tensor* balance_loss = nullptr);

  // Aux-loss-free bias step from the loads counted since the last call; resets the counts.
  void UpdateBias();

  torch::nn::Linear router{nullptr};  // D -> E, no bias
  std::vector<SwiGlu> experts;        // E routed experts of width d_e
  SwiGlu shared{nullptr};             // shared * d_e wide; null when no shared experts
  torch::Tensor expert_bias;          // (E) buffer, selection only
  torch::Tensor load;                 // (E) buffer, assignments since the last UpdateBias()

 private:
  MoEOptions options_;
};
TORCH_MODULE(MoE);

}  // namespace xmod

#endif  // XMOD_MODEL_MOE_H_
