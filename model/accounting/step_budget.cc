// See step_budget.h.
#include "model/accounting/step_budget.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace xmod {

absl::StatusOr<int64_t> PlannedSteps(double flop_budget, double train_flops_per_token,
                                     int64_t batch_tokens) {
  const double per_step = train_flops_per_token * static_cast<double>(batch_tokens);
  if (!(per_step > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("training.batch_tokens: a step of ",
                                                   batch_tokens, " tokens costs no FLOPs (",
                                                   train_flops_per_token, " per token)"));
  }
  const double steps = std::floor(flop_budget / per_step);
  if (!(steps >= 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("training.flop_budget: %g FLOPs is too small for one step of %g FLOPs",
                        flop_budget, per_step));
  }
  return static_cast<int64_t>(steps);
}

}  // namespace xmod
