// The layers of the stack, one class per computation pattern, variants chosen by options
// (paper §2, Table 7):
//  - DenseBlock: x += Attn(norm1 x); x += FFN(norm2 x) — the dense layer (FFN or MoE), and
//    without its FFN the full-sequence attention layer of the Routed-FFN control.
//  - RoutedBlock: a router picks tokens and gathers their rows (router.h); only those are
//    normalized, processed and added back (routed_rows.h), so the skipped tokens cost nothing
//    but their router score and one pass of the residual update. Attention among the
//    selected tokens (X-MoD / MoD sparse layer), selected queries over all keys
//    (Selected-Q/full-KV) or none (Routed-FFN); then the FFN on x + a. Update rules (§2.3):
//      X-MoD:  x_i += ς · r_i · (a_i + f_i)      (Routed-FFN: x_i += ς · r_i · f_i)
//      MoD:    x_i += a_i + r_i · f_i
//    f_i is the FFN of the block's own intermediate state x_i + a_i, as in a standard block.
// Legend: B = batch, T = tokens, k = selected tokens, D = d_model. Thread-compatible.
#ifndef XMOD_MODEL_BLOCKS_H_
#define XMOD_MODEL_BLOCKS_H_

#include <torch/torch.h>

#include "model/attention.h"
#include "model/ffn.h"
#include "model/moe.h"
#include "model/rms_norm.h"
#include "model/rope.h"
#include "model/router.h"
#include "model/routing_diagnostics.h"

namespace xmod {

// State threaded through the layers of one forward pass.
struct LayerContext {
  RoutingMode mode = RoutingMode::kTopK;
  const Rope* rope = nullptr;
  torch::Tensor bias;  // (B, T) float b_i of the current interval (paper §2.3)
  int interval = -1;   // interval the bias belongs to
  RoutingTrace* trace = nullptr;
  torch::Tensor router_loss;   // () sum of the routed layers' BCE losses
  int64_t routed_layers = 0;   // terms in router_loss
  torch::Tensor balance_loss;  // () sum of the MoE layers' balance losses
};

class BlockImpl : public torch::nn::Module {
 public:
  // x: (B, T, D) -> (B, T, D).
  virtual torch::Tensor forward(const torch::Tensor& x, LayerContext* ctx) = 0;
};

struct DenseBlockOptions {
  AttentionOptions attention;
  bool has_attention = true;
  bool has_ffn = true;
  int64_t ffn_dim = 0;
  bool use_moe = false;  // MoE in place of the SwiGLU FFN
  MoEOptions moe;
};

class DenseBlockImpl : public BlockImpl {
 public:
  explicit DenseBlockImpl(const DenseBlockOptions& options);
  torch::Tensor forward(const torch::Tensor& x, LayerContext* ctx) override;

  RMSNorm norm1{nullptr}, norm2{nullptr};
  Attention attention{nullptr};
  SwiGlu ffn{nullptr};
  MoE moe{nullptr};
};

struct RoutedBlockOptions {
  enum class AttentionKind { kSelected, kFullKv, kNone };
  enum class Update { kXMoD, kMoD };
  AttentionOptions attention;
  AttentionKind attention_kind = AttentionKind::kSelected;
  Update update = Update::kXMoD;
  int64_t ffn_dim = 0;
  int64_t sparsity = 1;          // K: top-k mode selects T / K tokens per sequence
  double tau = 1.0;              // token-choice bias strength (0 = ablation)
  bool learn_gate_scale = true;  // false = ablation "no gated scaling" (ς fixed at 1)
  double gate_scale_init = 1.0;  // ς at initialisation
  double router_init_std = 0.02;
};

class RoutedBlockImpl : public BlockImpl {
 public:
  explicit RoutedBlockImpl(const RoutedBlockOptions& options);
  torch::Tensor forward(const torch::Tensor& x, LayerContext* ctx) override;

  RMSNorm norm1{nullptr}, norm2{nullptr};
  Router router{nullptr};
  Attention attention{nullptr};
  SwiGlu ffn{nullptr};
  torch::Tensor gate_scale;  // () ς; undefined when fixed at 1

 private:
  RoutedBlockOptions options_;
};

}  // namespace xmod

#endif  // XMOD_MODEL_BLOCKS_H_
