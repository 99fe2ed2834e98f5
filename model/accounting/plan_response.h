// plan_response: the accounting of one model (accounting.h) as the API message
// xmod.v1.PlanResponse — what the coordinator's Plan RPC answers and what `xmodctl plan`
// computes offline and prints (-o json through common/proto_json.h, tables from its fields).
// Pure functions; thread-safe.
#ifndef XMOD_MODEL_ACCOUNTING_PLAN_RESPONSE_H_
#define XMOD_MODEL_ACCOUNTING_PLAN_RESPONSE_H_

#include "absl/status/statusor.h"
#include "model/accounting/accounting.h"
#include "xmod/v1/coordinator.pb.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

// Accounts `model` and its Dense reference (same backbone) at `seq_len`. Errors as
// Account's (INVALID_ARGUMENT naming a ModelSpec field, e.g. "k: ...", or "seq_len: ...").
absl::StatusOr<xmod::v1::PlanResponse> PlanModel(const xmod::v1::ModelSpec& model, int seq_len);

}  // namespace xmod

#endif  // XMOD_MODEL_ACCOUNTING_PLAN_RESPONSE_H_
