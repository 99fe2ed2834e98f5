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

// A fully resolved backbone (paper Table 4 columns).
struct Backbone {
  std::string name;
  int d_model = 0;
  int head_dim = 0;
  int n_layers = 0;  // active-equivalent layers
  int n_heads = 0;
  int n_kv_heads = 0;
  int ffn_dim = 0;
  int vocab_size = 0;
};

// Preset names: "165M", "298M", "556M", "936M", "1.65B" and the tiny CPU presets.
std::vector<std::string> BackbonePresetNames();

// The preset named by spec.name with every non-zero field of `spec` applied on top.
// INVALID_ARGUMENT naming the field ("backbone.name", "backbone.n_heads", ...) when unknown
// or inconsistent (heads not dividing the width, n_heads % n_kv_heads != 0, ...).
absl::StatusOr<Backbone> ResolveBackbone(const xmod::v1::BackboneSpec& spec);

// What one physical layer computes.
enum class LayerKind {
  kDense,          // full attention + FFN (or MoE FFN for arch MOE)
  kSparse,         // X-MoD / MoD routed layer: L/K tokens through attention + FFN
  kSparseFullKv,   // Selected-Q/full-KV control: routed queries, all tokens as keys/values
  kAttention,      // Routed-FFN control: full-sequence attention only
  kRoutedFfn,      // Routed-FFN control: L/K tokens through the FFN only
};

struct LayerPlan {
  std::vector<LayerKind> layers;  // physical order, input to output
  // Compact notation, e.g. "[D]x4 + ([S8]x24+[D]) + ([S8]x32+[D])x4".
  std::string notation;
  // Index of each sparse interval (run of sparse layers between dense layers) per layer;
  // -1 for non-sparse layers. Bias b_i resets at every interval (paper §2.3).
  std::vector<int> interval_of_layer;
};

// The layer plan of a model. Rule (ARCHITECTURE.md "Model"): [Dense]x N0 then groups
// [Sparse(K)] x (A*K) + [Dense] filling n_layers - N0 active-equivalent layers (a group
// counts 1 + A); when they do not divide, the first group is shortened.
// INVALID_ARGUMENT naming the field when A*K is not a whole number of layers, K < 1, ...
absl::StatusOr<LayerPlan> BuildLayerPlan(const xmod::v1::ModelSpec& model, const Backbone& backbone);

struct Accounting {
  Backbone backbone;
  LayerPlan plan;
  int layers = 0;                     // physical layers
  double per_layer_params = 0;        // attention + FFN (+ norms) of one dense layer
  double total_params = 0;            // N: all layers (all experts, routers) + 2 * vocab * d
  double active_params = 0;           // N_act: per-layer params x active-equivalent layers
  double forward_flops_per_token = 0; // paper Table 6 column, at the given L
  double train_flops_per_token = 0;   // 3 x forward
};

// Validates `model` for context length `seq_len` (L/K >= 1, ...) and counts it.
// Errors name the field path relative to ModelSpec ("k", "a", "moe.active_experts", ...).
absl::StatusOr<Accounting> Account(const xmod::v1::ModelSpec& model, int seq_len);

// Parses "6:64+2" (active:total+shared) into `moe`; INVALID_ARGUMENT on bad text.
absl::Status ParseExperts(const std::string& text, xmod::v1::MoESpec* moe);

}  // namespace xmod

#endif  // XMOD_MODEL_ACCOUNTING_ACCOUNTING_H_
