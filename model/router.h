// Token router of the routed layers (X-MoD, MoD and the two controls; paper §2.2–2.3, B.7).
//
//   s_i = w^T h_i                 router score, h = RMSNorm(x) (the layer's pre-norm input;
//                                 computed from x and the norm's gain, h is not formed)
//   z_i = s_i - tau * b_i         b_i: times token i was already selected in this interval
//   r_i = sigmoid(z_i)            gate of the residual update (Eq. of §2.3)
// Training (kTopK): the k = L/K tokens with the largest z in each sequence, non-causal,
// sorted back into sequence order. Evaluation (kThreshold): token i is selected iff
// r_i > 0.5, a per-token and hence causal rule; the count varies per sequence, so the
// selection is padded to the longest sequence and padding rows are flagged invalid.
// Auxiliary router loss (B.7): BCE between p_i = sigmoid(z_i) and q_i = [i in top-k of z].
// q is a constant target (no gradient through the choice) and p reads h.detach(), so the loss
// trains only the router vector w to predict top-k membership, not the backbone.
// We score the normalized h rather than the raw residual x, so scores do not drift with the
// residual's scale in deep stacks (a choice of ours; the paper writes s = w^T x).
// The router also gathers the selected rows of x for the layer. On float and double CPU
// tensors (kernel_choice.h, RouterOnCpu) the scores, the gather and x passed on to the
// residual update are one autograd node whose backward forms the whole gradient of x in one
// pass (router.cc); elsewhere (CUDA, bf16) the scores are one node and the gather ATen's
// index_select.
// Legend: B = batch, T = tokens, D = d_model, k = selected tokens. Thread-compatible.
#ifndef XMOD_MODEL_ROUTER_H_
#define XMOD_MODEL_ROUTER_H_

#include <torch/torch.h>

#include "model/rms_norm.h"

namespace xmod {

// How routed layers choose tokens.
enum class RoutingMode {
  kTopK,       // training: top k = L/K of s - tau*b per sequence, non-causal (paper §2.2)
  kThreshold,  // evaluation: causal rule r > 0.5 (paper §4.1, B.7)
};

// The tokens one routed layer processes.
struct Selection {
  torch::Tensor index;           // (B, k) int64 original positions; valid ones increasing
  torch::Tensor valid;           // (B, k) bool, false for padding; undefined when all valid
  torch::Tensor gate;            // (B, k) r at the selected tokens, 0 on padding
  torch::Tensor mask;            // (B, T) bool, the selection used
  torch::Tensor topk_mask;       // (B, T) bool, top-k of z (the BCE target)
  torch::Tensor threshold_mask;  // (B, T) bool, r > 0.5
  torch::Tensor aux_loss;        // () mean BCE of this layer, unweighted
  torch::Tensor rows;            // (B*k) int64 rows of index in x (B*T, D): b*T + index
  torch::Tensor x_rows;          // (B*k, D) x at rows
  torch::Tensor x_pass;          // (B*T, D) x, for the residual update (routed_rows.h)
  int64_t count() const { return index.size(1); }
};

class RouterImpl : public torch::nn::Module {
 public:
  RouterImpl(int64_t d_model, double tau, double init_std);

  // x: (B, T, D) the layer's input, scored through `norm` (its pre-norm); bias: (B, T) float
  // counts b; k: tokens per sequence in top-k mode.
  Selection forward(const torch::Tensor& x, const RMSNormImpl& norm, const torch::Tensor& bias,
                    int64_t k, RoutingMode mode);

  double tau() const { return tau_; }

  torch::Tensor weight;  // (D) router vector w

 private:
  double tau_;
};
TORCH_MODULE(Router);

}  // namespace xmod

#endif  // XMOD_MODEL_ROUTER_H_
