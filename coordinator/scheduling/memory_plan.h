// Memory plans (docs/fault-tolerance.md, "Out of memory"): what a run's next attempt changes
// in its training spec after out-of-memory failures. Each failure moves one rung down a fixed
// ladder that trades compute for memory without changing what is computed: first activation
// checkpointing (each layer's activations recomputed in backward, ~1/3 more FLOPs), then
// micro-batches of half the tokens, halved again at each failure, down to one window of
// seq_len tokens (gradient accumulation: the same optimizer step up to summation order). A
// rung is what the spec does not already have; past the last rung the run fails. The rung
// follows from the run's submitted spec and its out-of-memory failures alone, so a restarted
// coordinator (which keeps the count in runs.oom_failures) picks the same plan. Pure.
#ifndef XMOD_COORDINATOR_SCHEDULING_MEMORY_PLAN_H_
#define XMOD_COORDINATOR_SCHEDULING_MEMORY_PLAN_H_

#include <optional>
#include <string>

#include "xmod/v1/spec.pb.h"

namespace xmod::scheduling {

struct MemoryPlan {
  bool activation_checkpointing = false;
  int micro_batch_tokens = 0;  // per rank; 0 = the rank's whole share, as submitted
  // What the plan changed, for the attempt row and its event, e.g. "activation
  // checkpointing, micro-batches of 512 tokens (after 2 out-of-memory failures)"; empty for
  // the spec as submitted.
  std::string description;
};

// The plan of an attempt after `oom_failures` out-of-memory failures of a run submitted with
// `training`; nullopt when the ladder has no rung that far down (the run fails).
std::optional<MemoryPlan> MemoryPlanAfter(const xmod::v1::TrainingSpec& training, int oom_failures);

// `training` with `plan` applied.
void ApplyMemoryPlan(const MemoryPlan& plan, xmod::v1::TrainingSpec* training);

}  // namespace xmod::scheduling

#endif  // XMOD_COORDINATOR_SCHEDULING_MEMORY_PLAN_H_
