// plan_response: an Accounting as xmod.v1.PlanResponse (see plan_response.h).
#include "model/accounting/plan_response.h"

#include <string>

namespace xmod {
namespace {

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

absl::StatusOr<xmod::v1::PlanResponse> PlanModel(const xmod::v1::ModelSpec& model, int seq_len) {
  absl::StatusOr<Accounting> acc = Account(model, seq_len);
  if (!acc.ok()) return acc.status();
  xmod::v1::ModelSpec dense;
  dense.set_arch(xmod::v1::DENSE);
  *dense.mutable_backbone() = model.backbone();
  absl::StatusOr<Accounting> reference = Account(dense, seq_len);
  if (!reference.ok()) return reference.status();

  xmod::v1::PlanResponse out;
  out.set_layers(acc->layers);
  out.set_layer_plan(acc->plan.notation);
  out.set_total_params(acc->total_params);
  out.set_active_params(acc->active_params);
  out.set_forward_flops_per_token(acc->forward_flops_per_token);
  out.set_train_flops_per_token(acc->train_flops_per_token);
  const Backbone& b = acc->backbone;
  xmod::v1::BackboneSpec* backbone = out.mutable_backbone();
  backbone->set_name(b.name);
  backbone->set_d_model(b.d_model);
  backbone->set_head_dim(b.head_dim);
  backbone->set_n_layers(b.n_layers);
  backbone->set_n_heads(b.n_heads);
  backbone->set_n_kv_heads(b.n_kv_heads);
  backbone->set_ffn_dim(b.ffn_dim);
  backbone->set_vocab_size(b.vocab_size);
  out.set_seq_len(acc->seq_len);
  out.set_dense_layers(acc->dense_layers);
  out.set_sparse_layers(acc->sparse_layers);
  out.set_n0(acc->plan.n0);
  std::string kinds;
  kinds.reserve(acc->plan.layers.size());
  for (LayerKind kind : acc->plan.layers) kinds.push_back(KindLetter(kind));
  out.set_layer_kinds(kinds);
  out.set_per_layer_params(acc->per_layer_params);
  out.set_embedding_params(acc->embedding_params);
  out.set_capacity_ratio(acc->capacity_ratio);
  if (acc->experts.active > 0) {
    xmod::v1::MoESpec* experts = out.mutable_experts();
    experts->set_active_experts(acc->experts.active);
    experts->set_total_experts(acc->experts.total);
    experts->set_shared_experts(acc->experts.shared);
    experts->set_expert_dim(acc->experts.expert_dim);
  }
  if (reference->forward_flops_per_token > 0) {
    out.set_phi_over_phi_dense(acc->forward_flops_per_token / reference->forward_flops_per_token);
  }
  return out;
}

}  // namespace xmod
