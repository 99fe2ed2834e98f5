// See run_progress.h.
#include "coordinator/store/run_progress.h"

#include <algorithm>

#include "absl/status/statusor.h"
#include "model/accounting/accounting.h"
#include "model/accounting/step_budget.h"

namespace xmod {

void CompleteProgress(xmod::v1::Run* run) {
  xmod::v1::Progress* progress = run->mutable_progress();
  const xmod::v1::TrainingSpec& training = run->spec().training();
  const double budget =
      progress->flop_budget() > 0 ? progress->flop_budget() : training.flop_budget();
  const double flops_per_token = run->forward_flops_per_token() * TrainFlopsMultiplier(training);
  double planned_flops = budget;
  absl::StatusOr<int64_t> steps = PlannedSteps(budget, flops_per_token, training.batch_tokens());
  if (steps.ok()) {
    progress->set_planned_steps(*steps);
    planned_flops = static_cast<double>(*steps) * flops_per_token *
                    static_cast<double>(training.batch_tokens());
  }
  double fraction = planned_flops > 0 ? progress->flops() / planned_flops : 0;
  // The trainer reports SUCCEEDED only once it took every planned step.
  if (run->state() == xmod::v1::SUCCEEDED) fraction = 1;
  progress->set_fraction(std::clamp(fraction, 0.0, 1.0));
}

}  // namespace xmod
