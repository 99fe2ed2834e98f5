// Test fixtures of the B.3 pilot selection (coordinator/api/pilot_queries.h): a small pilot
// sweep of MoE and X-MoD runs, and runs finished through the real WorkerGateway with a
// chosen final validation loss, so that SelectPilot reads results stored as a worker stores
// them.
#ifndef XMOD_COORDINATOR_TESTS_PILOT_FIXTURE_H_
#define XMOD_COORDINATOR_TESTS_PILOT_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {

// TinySweep's data and training over "tiny-test" at L = 64: grid "pilot-moe" (MoE 2:4+0,
// K = 2, and 2:8+0, K = 4) then grid "pilot-xmod" (X-MoD K in {2, 4} x A in {1, 2} x seeds
// {1, 2}): 10 runs, the MoE ones first.
xmod::v1::SweepSpec TinyPilotSweep(const std::string& dir);

// Registers worker "pilot-worker" with one slot and, `count` times, leases the next queued
// run, reports one val/loss point of loss(run id) at its budget and finishes it SUCCEEDED.
// The run ids finished, in order; the first failing call's status otherwise.
absl::StatusOr<std::vector<int64_t>> FinishRunsWithLoss(
    xmod::v1::WorkerGateway::Stub& worker, int count,
    const std::function<double(int64_t run_id)>& loss);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_TESTS_PILOT_FIXTURE_H_
