// The number of whole optimizer steps a FLOP budget buys: the step count a run trains for
// (the trainer) and the denominator of its progress (every reader of a run). Pure,
// thread-safe.
#ifndef XMOD_MODEL_ACCOUNTING_STEP_BUDGET_H_
#define XMOD_MODEL_ACCOUNTING_STEP_BUDGET_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace xmod {

// floor(flop_budget / (train_flops_per_token x batch_tokens)). INVALID_ARGUMENT
// "training.flop_budget: ... too small for one step of N FLOPs" when that is below 1.
absl::StatusOr<int64_t> PlannedSteps(double flop_budget, double train_flops_per_token,
                                     int64_t batch_tokens);

}  // namespace xmod

#endif  // XMOD_MODEL_ACCOUNTING_STEP_BUDGET_H_
