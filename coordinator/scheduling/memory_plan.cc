// See memory_plan.h.
#include "coordinator/scheduling/memory_plan.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace xmod::scheduling {
namespace {

// The micro-batch a rank trains with under `training`, in tokens: micro_batch_tokens, or the
// rank's whole share of batch_tokens.
int SubmittedMicroBatch(const xmod::v1::TrainingSpec& training) {
  const int ranks = std::max(1, training.ranks());
  const int share = static_cast<int>(training.batch_tokens() / ranks);
  return training.micro_batch_tokens() > 0 ? std::min(training.micro_batch_tokens(), share) : share;
}

// The ladder's rungs below the submitted spec, in order.
std::vector<MemoryPlan> Rungs(const xmod::v1::TrainingSpec& training) {
  std::vector<MemoryPlan> rungs;
  MemoryPlan plan;
  plan.activation_checkpointing = training.activation_checkpointing();
  plan.micro_batch_tokens = training.micro_batch_tokens();
  if (!plan.activation_checkpointing) {
    plan.activation_checkpointing = true;
    rungs.push_back(plan);
  }
  const int seq_len = std::max(1, training.seq_len());
  int micro = SubmittedMicroBatch(training);
  while (micro / 2 >= seq_len) {
    micro = micro / 2 / seq_len * seq_len;  // whole windows
    plan.micro_batch_tokens = micro;
    rungs.push_back(plan);
  }
  return rungs;
}

}  // namespace

std::optional<MemoryPlan> MemoryPlanAfter(const xmod::v1::TrainingSpec& training,
                                          int oom_failures) {
  if (oom_failures <= 0) {
    MemoryPlan submitted;
    submitted.activation_checkpointing = training.activation_checkpointing();
    submitted.micro_batch_tokens = training.micro_batch_tokens();
    return submitted;
  }
  std::vector<MemoryPlan> rungs = Rungs(training);
  if (oom_failures > static_cast<int>(rungs.size())) return std::nullopt;
  MemoryPlan plan = rungs[oom_failures - 1];
  std::vector<std::string> parts;
  if (plan.activation_checkpointing && !training.activation_checkpointing()) {
    parts.push_back("activation checkpointing");
  }
  if (plan.micro_batch_tokens != training.micro_batch_tokens()) {
    parts.push_back(absl::StrCat("micro-batches of ", plan.micro_batch_tokens, " tokens"));
  }
  plan.description = absl::StrCat(absl::StrJoin(parts, ", "), " (after ", oom_failures,
                                  " out-of-memory failure", oom_failures == 1 ? "" : "s", ")");
  return plan;
}

void ApplyMemoryPlan(const MemoryPlan& plan, xmod::v1::TrainingSpec* training) {
  training->set_activation_checkpointing(plan.activation_checkpointing);
  training->set_micro_batch_tokens(plan.micro_batch_tokens);
}

}  // namespace xmod::scheduling
