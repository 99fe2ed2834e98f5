// Answers to the user API's fit calls (GetFit, Predict, Recommend; proto/xmod/v1/
// coordinator.proto) and the dashboard's recommend endpoint, from the latest stored
// successful fit of a sweep or of a study (studies.h; fit_trigger.h writes them). Predictions
// add Δ (paper Eq. 14, through fitter/recommend.h) to the dense loss interpolated at the
// point's FLOPs on the dense curve of the same L and backbone (fitter::DenseCurves over the
// succeeded runs of the sweep, or of every member sweep of the study); where no dense curve
// covers C, loss is 0. The Fit message keeps the bootstrap's parameter
// quantiles (ci_low, ci_high) but not its draws, so predictions carry no Δ interval
// (delta_low and delta_high stay 0).
// Thread-safe: each call reads through the store's read-only connections.
#ifndef XMOD_COORDINATOR_FITTING_FIT_QUERIES_H_
#define XMOD_COORDINATOR_FITTING_FIT_QUERIES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "coordinator/store/store.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {

// The newest successful fit of the sweep; its `error` carries the error of a newer failed
// attempt, if any. NOT_FOUND for an unknown sweep; FAILED_PRECONDITION "no fit yet for sweep
// N" without a successful fit (followed by "; the latest attempt failed: ..." after a
// stored failure).
absl::StatusOr<xmod::v1::Fit> LatestUsableFit(Store& store, int64_t sweep_id);

// GetFit: the sweep's fit as above, or the study's when request.study is set (NOT_FOUND for
// an unknown study; FAILED_PRECONDITION "no fit yet for study 'NAME'"). INVALID_ARGUMENT when
// both are set. Predict and Recommend choose their fit the same way.
absl::StatusOr<xmod::v1::Fit> LatestUsableFit(Store& store, const xmod::v1::GetFitRequest& request);

// Δ and loss of each point under the latest fit. A point's A = 0 means A = 1 (proto3 default;
// A means nothing for K = 1). INVALID_ARGUMENT past the request's caps (request_limits.h,
// checked first), or naming "points[i]" when the accounting cannot
// build the configuration (unknown backbone, A·K not whole, L < K). Errors of
// LatestUsableFit pass through.
absl::StatusOr<xmod::v1::PredictResponse> PredictWithLatestFit(
    Store& store, const xmod::v1::PredictRequest& request);

// The best (K, A) for the request's (C, L, backbone) over its candidate grid (empty ks =
// 1..32, empty as = {0.5, 1, 2, 3, 4, 5}) under the optional cap on total parameters.
// INVALID_ARGUMENT naming the field past the request's caps (request_limits.h, checked
// first), for a malformed query or when no candidate is admissible. Errors of
// LatestUsableFit pass through.
absl::StatusOr<xmod::v1::RecommendResponse> RecommendWithLatestFit(
    Store& store, const xmod::v1::RecommendRequest& request);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_FITTING_FIT_QUERIES_H_
