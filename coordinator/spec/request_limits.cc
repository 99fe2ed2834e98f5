// See request_limits.h.
#include "coordinator/spec/request_limits.h"

#include "absl/strings/str_cat.h"
#include "common/field_path.h"

namespace xmod {

absl::Status CheckRange(const std::string& path, int64_t value, int64_t min, int64_t cap) {
  if (value < min) return InvalidField(path, absl::StrCat("must be >= ", min));
  if (value > cap) {
    return InvalidField(path, absl::StrCat(value, " exceeds the limit ", cap));
  }
  return absl::OkStatus();
}

absl::Status CheckLimits(const xmod::v1::GetMetricsRequest& request, int max_points) {
  if (absl::Status s = CheckRange("max_points", request.max_points(), 0, max_points); !s.ok()) {
    return s;
  }
  return CheckRange("names", request.names_size(), 0, kMaxMetricNames);
}

absl::Status CheckLimits(const xmod::v1::ListRunsRequest& request) {
  if (request.limit() < 0) return InvalidField("limit", "must be >= 0 (0 = all)");
  return CheckRange("states", request.states_size(), 0, kMaxRunStates);
}

absl::Status CheckLimits(const xmod::v1::PredictRequest& request) {
  return CheckRange("points", request.points_size(), 0, kMaxPredictPoints);
}

absl::Status CheckLimits(const xmod::v1::RecommendRequest& request) {
  if (absl::Status s = CheckRange("ks", request.ks_size(), 0, kMaxRecommendOptions); !s.ok()) {
    return s;
  }
  return CheckRange("as", request.as_size(), 0, kMaxRecommendOptions);
}

absl::Status CheckLimits(const xmod::v1::ListEventsRequest& request) {
  if (absl::Status s = CheckRange("limit", request.limit(), 0, kMaxEventsListed); !s.ok()) {
    return s;
  }
  if (request.sweep_id() < 0) return InvalidField("sweep_id", "must be >= 0 (0 = every sweep)");
  if (request.run_id() < 0) return InvalidField("run_id", "must be >= 0 (0 = every run)");
  return CheckRange("before_id", request.before_id(), 0, INT64_MAX);
}

}  // namespace xmod
