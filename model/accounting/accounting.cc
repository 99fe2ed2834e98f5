// Parameter and FLOP accounting of a layer plan (docs/design.md "Model"; paper B.1
// "FLOPs accounting", Table 6, Table 7). Per token, at context length L:
//   forward FLOPs = sum over layers of 2 x (matrix parameters the token passes through)
//                 + 4 x L x (n_heads x head_dim) x (attention pairs per query, relative to L)
// with a sparse layer seen by 1/K of the tokens (its matrices count 1/K, its attention
// among L/K tokens 1/K^2). Embeddings, head, norms and routers' score vectors are left out
// of the FLOPs; training FLOPs are train_flops_multiplier x forward (default 3). Pure
// functions; thread-safe.
#include "model/accounting/accounting.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/field_path.h"

namespace xmod {
namespace {

// Matrix parameters of one layer's parts (paper Table 4 shapes; GQA).
struct LayerParts {
  double q_o = 0;         // W_q (d x H*hd) + W_o (H*hd x d)
  double k_v = 0;         // W_k + W_v (d x H_kv*hd each)
  double ffn = 0;         // SwiGLU 3*d*ffn, or for MoE all routed + shared experts
  double ffn_active = 0;  // what one token passes through: the FFN, or shared + active experts
  double router = 0;      // MoE router d x E (counted in N, not in FLOPs)
  double attention() const { return q_o + k_v; }
};

absl::Status ValidateScalars(const xmod::v1::ModelSpec& model) {
  if (model.has_tau() && !(model.tau() >= 0)) {
    return InvalidField("tau",
                        absl::StrCat("token-choice bias strength must be >= 0, got ", model.tau()));
  }
  if (model.has_router_loss_weight() && !(model.router_loss_weight() >= 0)) {
    return InvalidField("router_loss_weight",
                        absl::StrCat("must be >= 0, got ", model.router_loss_weight()));
  }
  if (model.has_gate_scale_init() && !std::isfinite(model.gate_scale_init())) {
    return InvalidField("gate_scale_init", "must be finite");
  }
  return absl::OkStatus();
}

absl::Status ValidateContext(int seq_len, double train_flops_multiplier) {
  if (!(train_flops_multiplier > 0) || !std::isfinite(train_flops_multiplier)) {
    return InvalidField("training.train_flops_multiplier",
                        absl::StrCat("must be finite and > 0, got ", train_flops_multiplier));
  }
  if (seq_len < 1) {
    return InvalidField("seq_len", absl::StrCat("context length L must be >= 1, got ", seq_len));
  }
  return absl::OkStatus();
}

// K, the share of tokens a sparse layer sees: 1 when the plan routes nothing.
absl::StatusOr<int> SparseDivisor(const xmod::v1::ModelSpec& model, const LayerPlan& plan,
                                  int seq_len) {
  const bool has_routing = [&] {
    for (LayerKind kind : plan.layers) {
      if (kind != LayerKind::kDense && kind != LayerKind::kAttention) return true;
    }
    return false;
  }();
  const int k = has_routing ? model.k() : 1;
  if (seq_len / k < 1) {
    return InvalidField("k", absl::StrCat("L/K = ", seq_len, "/", k,
                                          " leaves no token for the sparse layers (needs L >= K)"));
  }
  return k;
}

// The layer's matrix parameters; for MoE also resolves acc.experts.
absl::StatusOr<LayerParts> ResolveLayerParts(const xmod::v1::ModelSpec& model, Accounting& acc) {
  const Backbone& b = acc.backbone;
  const double d = b.d_model;
  const double q_width = static_cast<double>(b.n_heads) * b.head_dim;
  const double kv_width = static_cast<double>(b.n_kv_heads) * b.head_dim;
  LayerParts parts;
  parts.q_o = 2 * d * q_width;
  parts.k_v = 2 * d * kv_width;
  parts.ffn = 3 * d * b.ffn_dim;
  parts.ffn_active = parts.ffn;
  if (model.arch() == xmod::v1::MOE) {
    absl::StatusOr<Experts> experts = ResolveExperts(model.moe(), b);
    if (!experts.ok()) return experts.status();
    acc.experts = *experts;
    const double expert = 3 * d * acc.experts.expert_dim;
    parts.ffn = expert * (acc.experts.total + acc.experts.shared);
    parts.ffn_active = expert * (acc.experts.active + acc.experts.shared);
    parts.router = d * acc.experts.total;
  }
  return parts;
}

// Per-token sums over the layers of the plan.
struct LayerSums {
  double layer_params = 0;  // N without embeddings
  double active = 0;        // parameters one token passes through
  double flops = 0;
  double attention_flops = 0;  // the attention_full terms of flops
};

// What every layer kind's cost is built from.
struct CostTerms {
  LayerParts parts;
  double per_layer_params = 0;
  double d = 0;               // d_model: a sparse layer's router vector w
  double attention_full = 0;  // attention FLOPs per query over the full sequence
  double inv_k = 1;
};

// Adds one layer's parameters and FLOPs to `sums` and counts it in `acc`.
void AddLayer(LayerKind kind, const CostTerms& t, LayerSums& sums, Accounting& acc) {
  const LayerParts& parts = t.parts;
  const double inv_k = t.inv_k;
  switch (kind) {
    case LayerKind::kDense:
      ++acc.layers;
      ++acc.dense_layers;
      sums.layer_params += t.per_layer_params;
      sums.active += parts.attention() + parts.ffn_active;
      sums.flops += 2 * (parts.attention() + parts.ffn_active) + t.attention_full;
      sums.attention_flops += t.attention_full;
      break;
    case LayerKind::kSparse:
      // (paper §2.2) L/K tokens through attention + FFN; attention among L/K tokens.
      ++acc.layers;
      ++acc.sparse_layers;
      sums.layer_params += t.per_layer_params + t.d;  // + router vector w
      sums.active += (parts.attention() + parts.ffn) * inv_k;
      sums.flops += 2 * (parts.attention() + parts.ffn) * inv_k + t.attention_full * inv_k * inv_k;
      sums.attention_flops += t.attention_full * inv_k * inv_k;
      break;
    case LayerKind::kSparseFullKv:
      // (B.6) selected queries: Q/O + FFN for L/K tokens; K/V for all L tokens; each of
      // the L/K queries attends over the full sequence.
      ++acc.layers;
      ++acc.sparse_layers;
      sums.layer_params += t.per_layer_params + t.d;
      sums.active += (parts.q_o + parts.ffn) * inv_k + parts.k_v;
      sums.flops += 2 * ((parts.q_o + parts.ffn) * inv_k + parts.k_v) + t.attention_full * inv_k;
      sums.attention_flops += t.attention_full * inv_k;
      break;
    case LayerKind::kAttention:
      // (B.6) Routed-FFN control: full-sequence attention module (no FFN).
      sums.layer_params += parts.attention();
      sums.active += parts.attention();
      sums.flops += 2 * parts.attention() + t.attention_full;
      sums.attention_flops += t.attention_full;
      break;
    case LayerKind::kRoutedFfn:
      // (B.6) Routed-FFN refinement: L/K tokens through the FFN only.
      ++acc.layers;
      ++acc.sparse_layers;
      sums.layer_params += parts.ffn + t.d;
      sums.active += parts.ffn * inv_k;
      sums.flops += 2 * parts.ffn * inv_k;
      break;
  }
}

LayerSums SumLayers(const LayerParts& parts, int seq_len, int k, Accounting& acc) {
  CostTerms terms;
  terms.parts = parts;
  terms.per_layer_params = acc.per_layer_params;
  terms.d = acc.backbone.d_model;
  // Attention score + value FLOPs per query for a full causal sequence, counted as the
  // paper does over all L keys (Table 6 reproduces only so).
  const double q_width = static_cast<double>(acc.backbone.n_heads) * acc.backbone.head_dim;
  terms.attention_full = 4.0 * seq_len * q_width;
  terms.inv_k = 1.0 / k;
  LayerSums sums;
  for (LayerKind kind : acc.plan.layers) AddLayer(kind, terms, sums, acc);
  return sums;
}

void SetTotals(const LayerSums& sums, double train_flops_multiplier, Accounting& acc) {
  acc.total_params = sums.layer_params + acc.embedding_params;
  acc.active_params = sums.active;
  acc.forward_flops_per_token = sums.flops;
  acc.attention_flops_per_token = sums.attention_flops;
  acc.train_flops_per_token = train_flops_multiplier * sums.flops;
  acc.capacity_ratio = acc.total_params / (acc.active_params + acc.embedding_params);
}

}  // namespace

double TrainFlopsMultiplier(const xmod::v1::TrainingSpec& training) {
  return training.train_flops_multiplier() == 0 ? kDefaultTrainFlopsMultiplier
                                                : training.train_flops_multiplier();
}

absl::StatusOr<Accounting> Account(const xmod::v1::ModelSpec& model, int seq_len,
                                   double train_flops_multiplier) {
  if (absl::Status s = ValidateContext(seq_len, train_flops_multiplier); !s.ok()) return s;
  Accounting acc;
  absl::StatusOr<Backbone> backbone = ResolveBackbone(model.backbone());
  if (!backbone.ok()) return backbone.status();
  acc.backbone = *backbone;
  if (absl::Status s = ValidateScalars(model); !s.ok()) return s;

  absl::StatusOr<LayerPlan> plan = BuildLayerPlan(model, acc.backbone);
  if (!plan.ok()) return plan.status();
  acc.plan = *std::move(plan);
  acc.seq_len = seq_len;

  absl::StatusOr<int> k = SparseDivisor(model, acc.plan, seq_len);
  if (!k.ok()) return k.status();
  absl::StatusOr<LayerParts> parts = ResolveLayerParts(model, acc);
  if (!parts.ok()) return parts.status();
  acc.per_layer_params = parts->attention() + parts->ffn + parts->router;
  acc.embedding_params = 2.0 * acc.backbone.vocab_size * static_cast<double>(acc.backbone.d_model);

  const LayerSums sums = SumLayers(*parts, seq_len, *k, acc);
  SetTotals(sums, train_flops_multiplier, acc);
  return acc;
}

absl::StatusOr<double> FlopRatioToDense(const xmod::v1::ModelSpec& model, int seq_len) {
  absl::StatusOr<Accounting> acc = Account(model, seq_len);
  if (!acc.ok()) return acc.status();
  xmod::v1::ModelSpec dense;
  dense.set_arch(xmod::v1::DENSE);
  *dense.mutable_backbone() = model.backbone();
  absl::StatusOr<Accounting> reference = Account(dense, seq_len);
  if (!reference.ok()) return reference.status();
  return acc->forward_flops_per_token / reference->forward_flops_per_token;
}

}  // namespace xmod
