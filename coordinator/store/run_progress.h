// Run progress as every reader sees it (gRPC, HTTP, dashboard, xmodctl, the Python client):
// the whole optimizer steps a run's budget buys and the fraction of them done, derived from
// the stored step, FLOPs and accounting so that no client computes its own (a finished run
// spends up to one step's FLOPs less than its budget; flops / flop_budget read 99%).
#ifndef XMOD_COORDINATOR_STORE_RUN_PROGRESS_H_
#define XMOD_COORDINATOR_STORE_RUN_PROGRESS_H_

#include "xmod/v1/types.pb.h"

namespace xmod {

// Sets run->progress().planned_steps (PlannedSteps of its budget, its training FLOPs per
// token = forward_flops_per_token x train_flops_multiplier and batch_tokens; 0 when those
// are unknown) and fraction (flops over the planned steps' FLOPs, else over flop_budget,
// clamped to [0, 1]; 1 for a SUCCEEDED run).
void CompleteProgress(xmod::v1::Run* run);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_RUN_PROGRESS_H_
