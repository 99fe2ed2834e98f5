// The reads of a shared cluster (docs/operations.md, "Sharing a cluster"): GetUsage (`xmodctl
// usage`) — per user, slots in use, quota, weight and share from the sharing policy, and
// GPU-hours and core-hours within a window, from the database — and a run's sharing facts
// for GetRun (`xmodctl run show`).
#ifndef XMOD_COORDINATOR_API_USAGE_QUERIES_H_
#define XMOD_COORDINATOR_API_USAGE_QUERIES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "coordinator/scheduling/sharing_config.h"
#include "coordinator/store/store.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {

// The window's cap: 366 days.
inline constexpr int64_t kMaxUsageWindowMs = int64_t{366} * 24 * 3600 * 1000;

// INVALID_ARGUMENT naming window_ms when it is negative or past kMaxUsageWindowMs. Users
// listed: every user with live runs or attempts in the window, and every user the policy
// names, by name. `now_ms` is the wall clock.
absl::StatusOr<xmod::v1::GetUsageResponse> GetUsage(Store& store,
                                                    const scheduling::SharingPolicy& policy,
                                                    const xmod::v1::GetUsageRequest& request,
                                                    int64_t now_ms);

// Fills response->sharing for the run response->run().
absl::Status AddRunSharing(Store& store, xmod::v1::GetRunResponse* response);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_USAGE_QUERIES_H_
