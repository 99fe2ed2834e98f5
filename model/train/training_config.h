// Training settings of a run: defaults for unset TrainingSpec fields and their validation
// (the steps a FLOP budget buys: model/accounting/step_budget.h). LibTorch-free; pure
// functions, thread-safe.
#ifndef XMOD_MODEL_TRAIN_TRAINING_CONFIG_H_
#define XMOD_MODEL_TRAIN_TRAINING_CONFIG_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

// Fills zero (unset) TrainingSpec fields with their documented defaults and validates it:
// INVALID_ARGUMENT naming the field ("training.batch_tokens: ...") on bad values.
// Defaults: optimizer "muon", lr 3.2e-3 (Table 5), adamw_lr = lr, warmup_fraction 0.02,
// min_lr_ratio 0.1, eval_marks 8, eval_tokens = batch_tokens. weight_decay and grad_clip are
// taken as given (0 = none).
absl::StatusOr<xmod::v1::TrainingSpec> ResolveTraining(const xmod::v1::TrainingSpec& training);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_TRAINING_CONFIG_H_
