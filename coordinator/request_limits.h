// Caps of the numeric fields of Coordinator requests that size a call's work or its answer
// (docs/security.md, "Limits"). A request past a cap is refused, never clamped: INVALID_ARGUMENT
// naming the field path and the cap ("count: 500 exceeds the limit 100"), before any work.
// The sizes of a submitted SweepSpec are SpecLimits (sweep_expansion.h). Thread-safe.
#ifndef XMOD_COORDINATOR_REQUEST_LIMITS_H_
#define XMOD_COORDINATOR_REQUEST_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace xmod {

inline constexpr int kMaxProposals = 100;         // ProposeRuns.count, adaptive.max_in_flight
inline constexpr int kMaxDesignTargets = 100;     // ProposeRuns.targets
inline constexpr int kMaxDecisionsListed = 1000;  // ListDecisions.limit
inline constexpr int kMaxPredictPoints = 10000;   // Predict.points
inline constexpr int kMaxRecommendOptions = 100;  // Recommend.ks, Recommend.as (each)

// OK when `min <= value <= cap`; else INVALID_ARGUMENT "PATH: must be >= MIN" or
// "PATH: VALUE exceeds the limit CAP".
absl::Status CheckRange(const std::string& path, int64_t value, int64_t min, int64_t cap);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_REQUEST_LIMITS_H_
