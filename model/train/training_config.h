// Training settings of a run: defaults for unset TrainingSpec fields, their validation,
// and the number of optimizer steps a FLOP budget buys. LibTorch-free; pure functions,
// thread-safe.
#ifndef XMOD_MODEL_TRAIN_TRAINING_CONFIG_H_
#define XMOD_MODEL_TRAIN_TRAINING_CONFIG_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

// floor(flop_budget / (train_flops_per_token x batch_tokens)). INVALID_ARGUMENT
// "training.flop_budget: ... too small for one step of N FLOPs" when that is below 1.
absl::StatusOr<int64_t> PlannedSteps(double flop_budget, double train_flops_per_token,
                                     int64_t batch_tokens);

// Fills zero (unset) TrainingSpec fields with their documented defaults and validates it:
// INVALID_ARGUMENT naming the field ("training.batch_tokens: ...") on bad values.
// Defaults: optimizer "muon", lr 3.2e-3 (Table 5), adamw_lr = lr, warmup_fraction 0.02,
// min_lr_ratio 0.1, eval_marks 8, eval_tokens = batch_tokens. weight_decay and grad_clip are
// taken as given (0 = none).
absl::StatusOr<xmod::v1::TrainingSpec> ResolveTraining(const xmod::v1::TrainingSpec& training);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_TRAINING_CONFIG_H_
