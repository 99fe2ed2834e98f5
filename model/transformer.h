// Transformer: the language models the paper compares — Dense, MoD, X-MoD, MoE and the
// Routed-FFN / Selected-Q-full-KV controls — as one module whose layers follow the layer
// plan of model/accounting. Legend: B = batch, T = sequence length L, D = d_model,
// V = vocabulary.
//
// Thread-compatible (one training thread per instance). LibTorch throws c10::Error; callers
// at the edge of model/ catch it and turn it into a Status.
#ifndef XMOD_MODEL_TRANSFORMER_H_
#define XMOD_MODEL_TRANSFORMER_H_

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/accounting/accounting.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

// How sparse layers choose tokens.
enum class RoutingMode {
  kTopK,       // training: top k = L/K of s - tau*b per sequence, non-causal (paper §2.2)
  kThreshold,  // evaluation: causal rule r > 0.5 (paper §4.1, B.7)
};

// Per-forward routing record, filled when a trace is passed (evaluation diagnostics, B.7).
struct RoutingTrace {
  // One entry per sparse layer, in order: (B, T) bool masks of selected tokens, and for the
  // threshold/top-k agreement, both masks computed from the same scores.
  std::vector<torch::Tensor> selected;      // (B, T) bool, the mask actually used
  std::vector<torch::Tensor> topk_mask;     // (B, T) bool
  std::vector<torch::Tensor> threshold_mask;// (B, T) bool
  std::vector<int> interval;                // sparse interval index of each entry
};

struct ModelOutput {
  torch::Tensor loss;      // () mean next-token cross-entropy, nats
  torch::Tensor aux_loss;  // () weighted auxiliary losses (router BCE, MoE balance); 0 if none
};

class TransformerImpl : public torch::nn::Module {
 public:
  // `accounting` comes from Account(spec, seq_len) and fixes the layer plan.
  TransformerImpl(const xmod::v1::ModelSpec& spec, const Accounting& accounting, int seq_len);

  // tokens, targets: (B, T) int64. Returns losses; fills `trace` when non-null.
  ModelOutput forward(const torch::Tensor& tokens, const torch::Tensor& targets,
                      RoutingMode mode, RoutingTrace* trace = nullptr);

  // Parameters for Muon (2-D matrices of the body) and for AdamW (embeddings, head, norms,
  // scalars such as varsigma, routers' vectors), disjoint and together complete.
  std::vector<torch::Tensor> MuonParameters();
  std::vector<torch::Tensor> AdamWParameters();

  // Called after each optimizer step (MoE aux-loss-free bias update). No-op otherwise.
  void AfterOptimizerStep();
};
TORCH_MODULE(Transformer);

}  // namespace xmod

#endif  // XMOD_MODEL_TRANSFORMER_H_
