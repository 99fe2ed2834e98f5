// plan_json: renders an Accounting as the JSON object `xmodctl plan --output json` prints.
// No JSON library: the values are numbers, strings from a fixed alphabet and arrays.
// Pure functions; thread-safe.
#ifndef XMOD_MODEL_ACCOUNTING_PLAN_JSON_H_
#define XMOD_MODEL_ACCOUNTING_PLAN_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/accounting/accounting.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

// One JSON object (single line) with the keys
//   backbone {name, d_model, head_dim, n_layers, n_heads, n_kv_heads, ffn_dim, vocab_size},
//   seq_len, layers, dense_layers, sparse_layers, n0, layer_plan (notation string),
//   layer_kinds (one letter per entry of plan.layers: D dense, S sparse, Q selected-Q/full-KV,
//   A attention, F routed FFN), per_layer_params, embedding_params, total_params,
//   active_params, capacity_ratio, forward_flops_per_token, train_flops_per_token,
//   experts {active, total, shared, expert_dim} (MoE only),
//   phi_over_phi_dense (only when `dense_reference` is non-null).
// `dense_reference` is the Dense model of the same backbone and L, or nullptr.
std::string AccountingToJson(const Accounting& accounting, const Accounting* dense_reference);

// Accounts `model` and its Dense reference at `seq_len` and renders both as above, with
// phi_over_phi_dense. Errors as Account's.
absl::StatusOr<std::string> PlanJson(const xmod::v1::ModelSpec& model, int seq_len);

}  // namespace xmod

#endif  // XMOD_MODEL_ACCOUNTING_PLAN_JSON_H_
