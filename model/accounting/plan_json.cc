// plan_json: the `xmodctl plan --output json` rendering of an Accounting.
#include "model/accounting/plan_json.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

// Shortest round-trip form is not needed; 17 significant digits keep every double exact.
std::string Number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

// Backbone names and notation use letters, digits and "[]()+.x -": only quotes and
// backslashes would need escaping, and control characters cannot appear; escape anyway.
std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
      out += buffer;
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

char KindLetter(LayerKind kind) {
  switch (kind) {
    case LayerKind::kDense:
      return 'D';
    case LayerKind::kSparse:
      return 'S';
    case LayerKind::kSparseFullKv:
      return 'Q';
    case LayerKind::kAttention:
      return 'A';
    case LayerKind::kRoutedFfn:
      return 'F';
  }
  return '?';
}

}  // namespace

std::string AccountingToJson(const Accounting& acc, const Accounting* dense_reference) {
  const Backbone& b = acc.backbone;
  std::string kinds;
  kinds.reserve(acc.plan.layers.size());
  for (LayerKind kind : acc.plan.layers) kinds.push_back(KindLetter(kind));
  std::string out =
      absl::StrCat("{\"backbone\":{\"name\":", Quote(b.name), ",\"d_model\":", b.d_model,
                   ",\"head_dim\":", b.head_dim, ",\"n_layers\":", b.n_layers,
                   ",\"n_heads\":", b.n_heads, ",\"n_kv_heads\":", b.n_kv_heads,
                   ",\"ffn_dim\":", b.ffn_dim, ",\"vocab_size\":", b.vocab_size, "}");
  absl::StrAppend(&out, ",\"seq_len\":", acc.seq_len, ",\"layers\":", acc.layers,
                  ",\"dense_layers\":", acc.dense_layers, ",\"sparse_layers\":", acc.sparse_layers,
                  ",\"n0\":", acc.plan.n0, ",\"layer_plan\":", Quote(acc.plan.notation),
                  ",\"layer_kinds\":", Quote(kinds));
  absl::StrAppend(&out, ",\"per_layer_params\":", Number(acc.per_layer_params),
                  ",\"embedding_params\":", Number(acc.embedding_params),
                  ",\"total_params\":", Number(acc.total_params),
                  ",\"active_params\":", Number(acc.active_params),
                  ",\"capacity_ratio\":", Number(acc.capacity_ratio),
                  ",\"forward_flops_per_token\":", Number(acc.forward_flops_per_token),
                  ",\"train_flops_per_token\":", Number(acc.train_flops_per_token));
  if (acc.experts.active > 0) {
    absl::StrAppend(&out, ",\"experts\":{\"active\":", acc.experts.active,
                    ",\"total\":", acc.experts.total, ",\"shared\":", acc.experts.shared,
                    ",\"expert_dim\":", acc.experts.expert_dim, "}");
  }
  if (dense_reference != nullptr) {
    absl::StrAppend(&out, ",\"phi_over_phi_dense\":",
                    Number(acc.forward_flops_per_token / dense_reference->forward_flops_per_token));
  }
  out += "}";
  return out;
}

absl::StatusOr<std::string> PlanJson(const xmod::v1::ModelSpec& model, int seq_len) {
  absl::StatusOr<Accounting> acc = Account(model, seq_len);
  if (!acc.ok()) return acc.status();
  xmod::v1::ModelSpec dense;
  dense.set_arch(xmod::v1::DENSE);
  *dense.mutable_backbone() = model.backbone();
  absl::StatusOr<Accounting> reference = Account(dense, seq_len);
  if (!reference.ok()) return reference.status();
  return AccountingToJson(*acc, &*reference);
}

}  // namespace xmod
