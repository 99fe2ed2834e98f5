// Limits on a metric point that every process handling one shares: the worker drops a point
// past them before numbering it (worker/metric_relay.h), and the coordinator refuses a
// ReportMetrics holding one (coordinator/api/worker_request_limits.h, docs/security.md
// "Limits"). Header-only constants.
#ifndef XMOD_COMMON_METRIC_LIMITS_H_
#define XMOD_COMMON_METRIC_LIMITS_H_

#include <cstddef>

namespace xmod {

inline constexpr size_t kMaxMetricNameBytes = 256;  // MetricPoint.name

}  // namespace xmod

#endif  // XMOD_COMMON_METRIC_LIMITS_H_
