// The user API's reads (xmod.v1.Coordinator, proto/xmod/v1/coordinator.proto), one function a
// read: the gRPC methods of CoordinatorService and the dashboard's HTTP routes
// (http_routes.h) both answer through these, so an RPC and a GET of the same thing cannot
// drift apart. Each reads one consistent snapshot through Store::Read (a read-only
// connection: a read-scope caller changes no row) and returns the response message.
// The caller has already checked the caller's scope (Access::kRead: service_util.h for gRPC,
// http_auth.h for HTTP). The fit reads (GetFit, Predict, Recommend) are fit_queries.h's.
// NOT_FOUND names the missing sweep, run or study; INVALID_ARGUMENT names the field past its
// cap (request_limits.h). Thread-safe.
#ifndef XMOD_COORDINATOR_API_USER_QUERIES_H_
#define XMOD_COORDINATOR_API_USER_QUERIES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/store/store.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {

absl::StatusOr<xmod::v1::Sweep> GetSweep(Store& store, const xmod::v1::GetSweepRequest& request);

// Newest first; INVALID_ARGUMENT for a negative limit (0 = all).
absl::StatusOr<xmod::v1::ListSweepsResponse> ListSweeps(Store& store,
                                                        const xmod::v1::ListSweepsRequest& request);

// What ListRuns answers for a sweep_id no sweep has: no runs (the RPC), or NOT_FOUND (the
// dashboard's /api/sweeps/{id}/runs).
enum class UnknownSweep { kNoRuns, kNotFound };

// One page of runs (or of replicate groups) of the request's sweep, states and filters in
// its sort order, with the next page's token (run_listing.h); INVALID_ARGUMENT naming the
// field for a request past its caps or a malformed page token or one from another query.
absl::StatusOr<xmod::v1::ListRunsResponse> ListRuns(Store& store,
                                                    const xmod::v1::ListRunsRequest& request,
                                                    UnknownSweep unknown_sweep);

// The run with its attempts and checkpoints; pending_reason is the scheduler's to add.
absl::StatusOr<xmod::v1::GetRunResponse> GetRun(Store& store,
                                                const xmod::v1::GetRunRequest& request);

// The run's canonical metric series; `max_points` caps request.max_points
// (CoordinatorServiceOptions::max_metric_points, kMaxMetricPoints for HTTP).
absl::StatusOr<xmod::v1::GetMetricsResponse> GetMetrics(Store& store,
                                                        const xmod::v1::GetMetricsRequest& request,
                                                        int max_points);

// The sweep's design decisions, newest first (limit 0 = 100).
absl::StatusOr<xmod::v1::ListDecisionsResponse> ListDecisions(
    Store& store, const xmod::v1::ListDecisionsRequest& request);

absl::StatusOr<xmod::v1::Study> GetStudy(Store& store, const xmod::v1::GetStudyRequest& request);

// Newest first.
absl::StatusOr<xmod::v1::ListStudiesResponse> ListStudies(
    Store& store, const xmod::v1::ListStudiesRequest& request);

// The event log, newest first (limit 0 = 100), filtered by the request's sweep, run and actor,
// and the before_id of the next page (0 on the last one).
absl::StatusOr<xmod::v1::ListEventsResponse> ListEvents(Store& store,
                                                        const xmod::v1::ListEventsRequest& request);

// WatchSweep's events: the sweep, and the runs named in `run_ids` (all runs when null).
absl::StatusOr<xmod::v1::WatchSweepEvent> ReadSweepEvent(Store& store, int64_t sweep_id,
                                                         const std::vector<int64_t>* run_ids);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_USER_QUERIES_H_
