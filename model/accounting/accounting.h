// Accounting: backbone presets (paper Table 4), the layer plan (paper §2.2, Eq. 2, B.1),
// and parameter / FLOP counts that reproduce the paper's Table 6. LibTorch-free: linked by
// the coordinator (budgets), the fitter (N(K,A)/N_act), the CLI (`plan`) and the trainer.
// All functions are pure and thread-safe.
#ifndef XMOD_MODEL_ACCOUNTING_ACCOUNTING_H_
#define XMOD_MODEL_ACCOUNTING_ACCOUNTING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

// A fully resolved backbone (paper Table 4 columns). n_heads * head_dim need not equal
// d_model (Qwen3's 556M backbone has 16 x 128 = 2048 query width on d = 1024).
struct Backbone {
  std::string name;
  int d_model = 0;
  int head_dim = 0;
  int n_layers = 0;  // active-equivalent layers
  int n_heads = 0;
  int n_kv_heads = 0;
  int ffn_dim = 0;
  int vocab_size = 0;
  double rope_theta = 0;  // RoPE base frequency θ (Qwen3's 1e6 for Table 4; see backbones.cc)
  // Qwen3's QK-Norm (per-head RMSNorm of queries and keys; Table 4 backbones). Its gains are
  // norms, which the accounting leaves out of N like every other norm.
  bool qk_norm = false;
};

// Preset names: "165M", "298M", "556M", "936M", "1.65B" (paper Table 4, vocabulary 50,257),
// the CPU-sweep presets "cpu-d64", "cpu-d96", "cpu-d128", "cpu-d192", "cpu-d256" and
// "cpu-d96-t4" (cpu-d96 with Table 4's attention proportions; 8 layers, vocabulary 2048) and
// "tiny-test" (d 32, 6 layers, vocabulary 256) for unit tests.
std::vector<std::string> BackbonePresetNames();

// The preset named by spec.name with every non-zero field of `spec` applied on top; with no
// name, every field must be given (rope_theta excepted: 0 takes the preset's, or 10000
// without one). INVALID_ARGUMENT naming the field ("backbone.name", "backbone.n_heads", ...)
// when unknown, missing, negative or inconsistent (n_heads not dividing d_model, n_kv_heads
// not dividing n_heads).
absl::StatusOr<Backbone> ResolveBackbone(const xmod::v1::BackboneSpec& spec);

// What one physical layer computes.
enum class LayerKind {
  kDense,         // full attention + FFN (or MoE FFN for arch MOE)
  kSparse,        // X-MoD / MoD routed layer: L/K tokens through attention + FFN
  kSparseFullKv,  // Selected-Q/full-KV control: routed queries, all tokens as keys/values
  kAttention,     // Routed-FFN control: full-sequence attention only
  kRoutedFfn,     // Routed-FFN control: L/K tokens through the FFN only
};

struct LayerPlan {
  std::vector<LayerKind> layers;  // physical order, input to output
  // Compact notation, e.g. "[D]x4 + ([S8]x24+[D]) + ([S8]x32+[D])x4".
  std::string notation;
  // Index of each sparse interval (run of sparse layers between dense layers) per layer;
  // -1 for non-sparse layers. Bias b_i resets at every interval (paper §2.3).
  std::vector<int> interval_of_layer;
  int n0 = 0;  // dense prefix actually used (after defaults and the no-anchors move);
               // 0 for Dense and MoE plans
};

// The layer plan of a model. Rule (docs/design.md "Model"): [Dense]x N0 then groups
// [Sparse(K)] x (A*K) + [Dense] filling n_layers - N0 active-equivalent layers (a group
// counts 1 + A); when they do not divide, the first group is shortened. Defaults: N0 = 4
// (X-MoD and its controls), N0 = 1 and A = 1/K for MoD (paper B.1). K = 1 gives the dense
// plan for every sparse architecture. Routed-FFN (B.6) replaces each group's sparse layers
// by ([Attention] + [RoutedFfn] x K) x A.
// No-anchors ablation (Table 3 "w/o dense anchors", model.no_anchors), at matched size: the
// groups' anchors move into the dense prefix ("[D]x4 + ([S16]x16+[D])x12" becomes
// "[D]x16 + ([S16]x16)x12"), so the ablation keeps full X-MoD's N_act, N, depth and
// phi/phi_D exactly — §4.4 compares all Table 3 variants "under the same N_act" and
// training compute — and removes only the periodic full-token synchronisation; sparse
// intervals (the token-choice bias resets) stay where the anchors were. LayerPlan::n0 is
// then the prefix including the moved anchors.
// INVALID_ARGUMENT naming the field when A*K is not a whole number of layers, K < 1, ...
absl::StatusOr<LayerPlan> BuildLayerPlan(const xmod::v1::ModelSpec& model,
                                         const Backbone& backbone);

// The MoE configuration actually used (arch MOE), written "active:total+shared".
struct Experts {
  int active = 0;      // routed experts per token (top-k)
  int total = 0;       // routed experts per layer
  int shared = 0;      // always-on experts per layer
  int expert_dim = 0;  // d_e; default ffn_dim / (active + shared), so FLOPs match Dense
};

// Counts of one model at context length L. Parameter counts are matrix weights only (q, k,
// v, o, the three SwiGLU matrices, experts) plus router weights; RMSNorm weights and the
// per-layer scalar varsigma are left out (< 0.01% of N, and not in the paper's counts).
struct Accounting {
  Backbone backbone;
  LayerPlan plan;
  // Physical layers, the paper's "Layers" column. For Routed-FFN this counts layers with an
  // FFN (dense layers + routed FFN refinements), as Table 7 does; plan.layers also holds
  // the full-sequence attention modules.
  int layers = 0;
  double per_layer_params = 0;         // attention + FFN of one dense layer (no norms);
                                       // for MoE: attention + all experts + router
  double total_params = 0;             // N: all layers (all experts, routers) + 2 * vocab * d
  double active_params = 0;            // N_act: per-layer params x active-equivalent layers
  double forward_flops_per_token = 0;  // paper Table 6 column, at the given L
  double train_flops_per_token = 0;    // train_flops_multiplier x forward (default 3 x)
  // The attention score + value part of forward_flops_per_token, counted over all L keys as
  // the paper counts it; a causal kernel executes about half of it.
  double attention_flops_per_token = 0;

  int seq_len = 0;              // L the FLOPs were counted at
  double embedding_params = 0;  // 2 * vocab * d (untied embedding and head)
  double capacity_ratio = 0;    // N / (N_act + embeddings), paper Table 9 "N/N_act"
  int dense_layers = 0;         // layers with full-sequence attention + FFN
  int sparse_layers = 0;        // routed layers (kSparse, kSparseFullKv, kRoutedFfn)
  Experts experts;              // arch MOE only
};

// Training FLOPs per forward FLOP when TrainingSpec.train_flops_multiplier is unset:
// forward + backward at twice the forward. The paper aligns runs by "logged training
// FLOPs" (B.1) without stating the factor; 3 is the usual reading.
inline constexpr double kDefaultTrainFlopsMultiplier = 3.0;

// training.train_flops_multiplier, or kDefaultTrainFlopsMultiplier when it is 0 (unset).
// Validity (> 0, finite) is checked where specs are validated.
double TrainFlopsMultiplier(const xmod::v1::TrainingSpec& training);

// Validates `model` for context length `seq_len` (L/K >= 1, ...) and counts it, with
// train_flops_per_token = train_flops_multiplier x forward FLOPs per token (the budget
// C = multiplier x forward FLOPs/token x tokens). Errors name the field path relative to
// ModelSpec ("k", "a", "moe.active_experts", ...); a multiplier that is not finite and
// > 0 is INVALID_ARGUMENT "training.train_flops_multiplier: ...".
absl::StatusOr<Accounting> Account(const xmod::v1::ModelSpec& model, int seq_len,
                                   double train_flops_multiplier = kDefaultTrainFlopsMultiplier);

// phi / phi_D: forward FLOPs per token of `model` over those of the Dense model on the same
// backbone and L (paper Table 1 column).
absl::StatusOr<double> FlopRatioToDense(const xmod::v1::ModelSpec& model, int seq_len);

// Parses "6:64+2" (active:total+shared; "+shared" optional) into `moe`, leaving its other
// fields alone; INVALID_ARGUMENT on bad text. Consistency is checked by Account.
absl::Status ParseExperts(const std::string& text, xmod::v1::MoESpec* moe);

// Validates `moe` against `backbone` and fills in the default expert_dim. Errors name the
// field relative to ModelSpec ("moe.total_experts", ...).
absl::StatusOr<Experts> ResolveExperts(const xmod::v1::MoESpec& moe, const Backbone& backbone);

}  // namespace xmod

#endif  // XMOD_MODEL_ACCOUNTING_ACCOUNTING_H_
