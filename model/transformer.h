// Transformer: the language models the paper compares — Dense, MoD, X-MoD, MoE and the
// Routed-FFN / Selected-Q-full-KV controls — as one module whose layers follow the layer
// plan of model/accounting. Legend: B = batch, T = sequence length L, D = d_model,
// V = vocabulary.
//
// RoutingMode lives in model/router.h and RoutingTrace in model/routing_diagnostics.h.
// Aux loss = router_loss_weight x mean BCE over routed layers (B.7) + balance_loss_weight x
// sum over MoE layers of their balance losses.
// Initialisation: matrices normal(0, 0.02), the residual-stream outputs (attention W_o and
// FFN W2) scaled by 1/sqrt(2 n_layers) with n_layers the active-equivalent depth, router
// vectors normal(0, 0.02), ς = gate_scale_init, norms 1.
//
// Thread-compatible (one training thread per instance). LibTorch throws c10::Error; callers
// at the edge of model/ catch it and turn it into a Status.
#ifndef XMOD_MODEL_TRANSFORMER_H_
#define XMOD_MODEL_TRANSFORMER_H_

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/accounting/accounting.h"
#include "model/blocks.h"
#include "model/rope.h"
#include "model/router.h"
#include "model/routing_diagnostics.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

// How the model computes, as opposed to what it is (the ModelSpec): kernels and memory.
struct ModelRuntimeOptions {
  bool fused_attention = false;           // at::scaled_dot_product_attention
  bool activation_checkpointing = false;  // recompute layers in backward (layer_checkpoint.h)
};

struct ModelOutput {
  torch::Tensor loss;      // () mean next-token cross-entropy, nats
  torch::Tensor aux_loss;  // () weighted auxiliary losses (router BCE, MoE balance); 0 if none
};

// Mean next-token cross-entropy of logits (N, V) against targets (N) int64 in [0, V), in at
// least float32 (as autocast runs the loss). One autograd node: backward is
// (softmax - onehot(target)) * dloss / N from the saved log-probabilities, with no (N, V)
// zero-filled gradient and no log-softmax backward pass.
torch::Tensor NextTokenLoss(const torch::Tensor& logits, const torch::Tensor& targets);

class TransformerImpl : public torch::nn::Module {
 public:
  // `accounting` comes from Account(spec, seq_len) and fixes the layer plan.
  TransformerImpl(const xmod::v1::ModelSpec& spec, const Accounting& accounting, int seq_len,
                  const ModelRuntimeOptions& runtime = {});

  // tokens, targets: (B, T) int64. Returns losses; fills `trace` when non-null.
  ModelOutput forward(const torch::Tensor& tokens, const torch::Tensor& targets, RoutingMode mode,
                      RoutingTrace* trace = nullptr);

  // Parameters for Muon (2-D matrices of the body) and for AdamW (embeddings, head, norms,
  // scalars such as varsigma, routers' vectors), disjoint and together complete.
  std::vector<torch::Tensor> MuonParameters();
  std::vector<torch::Tensor> AdamWParameters();

  // Called after each optimizer step (MoE aux-loss-free bias update). No-op otherwise.
  void AfterOptimizerStep();

  // Whether a training step (top-k routing) has shapes and a control flow that do not depend
  // on the data, so that its kernels can be recorded once and replayed (a CUDA graph): every
  // architecture but MoE, whose layers read their experts' row counts on the host.
  bool StaticTrainingStep() const { return moe_layers_.empty(); }

  // The parameters a training step may leave without a gradient — the MoE experts no token
  // chose; every other parameter gets one at every step.
  std::vector<torch::Tensor> MayMissGradients() const;

  // Next-token logits (B, T, V) for tokens (B, T); the same pass as forward() without the
  // loss. Fills `trace` when non-null.
  torch::Tensor Logits(const torch::Tensor& tokens, RoutingMode mode,
                       RoutingTrace* trace = nullptr);

  // The physical layers, input to output (DenseBlockImpl / RoutedBlockImpl).
  const std::vector<std::shared_ptr<BlockImpl>>& layers() const { return layers_; }

  // RoPE base frequency θ of the backbone (Backbone::rope_theta).
  double rope_theta() const { return rope_.theta(); }

  torch::nn::Embedding embed{nullptr};  // (V, D) token embedding
  RMSNorm norm_f{nullptr};              // final norm
  torch::nn::Linear lm_head{nullptr};   // D -> V, untied from the embedding

 private:
  // Runs embedding, layers and final norm: (B, T) -> (B, T, D); fills ctx.
  torch::Tensor Body(const torch::Tensor& tokens, RoutingMode mode, RoutingTrace* trace,
                     LayerContext* ctx);
  void InitParameters(const Accounting& accounting);

  std::vector<std::shared_ptr<BlockImpl>> layers_;
  std::vector<int> interval_of_layer_;
  std::vector<bool> checkpointable_;  // per layer: activation checkpointing applies
  std::vector<MoE> moe_layers_;
  Rope rope_;
  int64_t head_dim_ = 0;
  double router_loss_weight_ = 0.01;
  double balance_loss_weight_ = 1e-3;
};
TORCH_MODULE(Transformer);

}  // namespace xmod

#endif  // XMOD_MODEL_TRANSFORMER_H_
