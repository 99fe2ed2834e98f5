// Caps of the fields of Coordinator requests that size a call's work or its answer (numbers,
// repeated fields; docs/security.md, "Limits"). A request past a cap is refused, never
// clamped: INVALID_ARGUMENT naming the field path and the cap ("count: 500 exceeds the limit
// 100"), before any work. The gRPC service and the HTTP API check a request through the same
// CheckLimits. The sizes of a submitted SweepSpec are SpecLimits (sweep_expansion.h).
// Thread-safe.
#ifndef XMOD_COORDINATOR_SPEC_REQUEST_LIMITS_H_
#define XMOD_COORDINATOR_SPEC_REQUEST_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "xmod/v1/coordinator.pb.h"
#include "xmod/v1/types.pb.h"

namespace xmod {

inline constexpr int kMaxProposals = 100;         // ProposeRuns.count, adaptive.max_in_flight
inline constexpr int kMaxDesignTargets = 100;     // ProposeRuns.targets
inline constexpr int kMaxDecisionsListed = 1000;  // ListDecisions.limit
inline constexpr int kMaxEventsListed = 1000;     // ListEvents.limit
inline constexpr int kMaxPredictPoints = 10000;   // Predict.points
inline constexpr int kMaxRecommendOptions = 100;  // Recommend.ks, Recommend.as (each)
inline constexpr int kMaxMetricNames = 256;       // GetMetrics.names
// ListRuns.states: one entry per RunState value at most.
inline constexpr int kMaxRunStates = xmod::v1::RunState_ARRAYSIZE;

// OK when `min <= value <= cap`; else INVALID_ARGUMENT "PATH: must be >= MIN" or
// "PATH: VALUE exceeds the limit CAP".
absl::Status CheckRange(const std::string& path, int64_t value, int64_t min, int64_t cap);

// The caps of one request, as above. `max_points` is the caller's cap of max_points
// (CoordinatorServiceOptions::max_metric_points).
absl::Status CheckLimits(const xmod::v1::GetMetricsRequest& request, int max_points);
absl::Status CheckLimits(const xmod::v1::ListRunsRequest& request);
absl::Status CheckLimits(const xmod::v1::PredictRequest& request);
absl::Status CheckLimits(const xmod::v1::RecommendRequest& request);
absl::Status CheckLimits(const xmod::v1::ListEventsRequest& request);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_SPEC_REQUEST_LIMITS_H_
