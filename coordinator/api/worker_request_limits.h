// Limits on what a worker sends (docs/security.md, "Limits"): the bytes of every string and
// the entries of every repeated field of a WorkerGateway request, checked before the
// scheduler sees the request. A request past a limit is INVALID_ARGUMENT naming the field and
// the limit, and stores nothing; FinishRun alone is never refused for its error text (an
// attempt's outcome must not be lost): the text is cut to its last kMaxErrorBytes instead.
// Thread-compatible free functions.
#ifndef XMOD_COORDINATOR_API_WORKER_REQUEST_LIMITS_H_
#define XMOD_COORDINATOR_API_WORKER_REQUEST_LIMITS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "common/metric_limits.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

inline constexpr size_t kMaxWorkerNameBytes = 128;  // worker_name
inline constexpr size_t kMaxHostBytes = 255;        // hostname, advertise_host (DNS)
inline constexpr size_t kMaxVersionBytes = 256;     // version
inline constexpr size_t kMaxSlotDescriptionBytes = 256;
inline constexpr int kMaxSlots = 1024;          // slots, free_slots, running
inline constexpr int kMaxMetricPoints = 10000;  // points per ReportMetrics
// points[i].name: kMaxMetricNameBytes (common/metric_limits.h, which the worker shares).
inline constexpr size_t kMaxPathBytes = 4096;    // checkpoint path (PATH_MAX)
inline constexpr size_t kMaxReasonBytes = 4096;  // ReportCheckpoint.rejected
inline constexpr size_t kMaxErrorBytes = 16384;  // FinishRun.error, kept from its end

absl::Status CheckLimits(const xmod::v1::RegisterRequest& request);
absl::Status CheckLimits(const xmod::v1::HeartbeatRequest& request);
absl::Status CheckLimits(const xmod::v1::AcquireRunRequest& request);
absl::Status CheckLimits(const xmod::v1::ReportMetricsRequest& request);
// Also: sha256 is 64 lower-case hex digits and bytes >= 1 (for a refusal, `rejected`, the
// digest may be empty: a checkpoint recorded without one).
absl::Status CheckLimits(const xmod::v1::ReportCheckpointRequest& request);

// `request` with its error text cut to its last kMaxErrorBytes (at a UTF-8 character
// boundary, marked "(cut) ").
xmod::v1::FinishRunRequest WithinLimits(xmod::v1::FinishRunRequest request);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_WORKER_REQUEST_LIMITS_H_
