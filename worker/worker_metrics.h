// WorkerMetrics: the worker's Prometheus series (docs/operations.md, "Monitoring"), served
// by the endpoint that main starts on --metrics_listen:
//   xmod_worker_slots{state="busy"|"free"}        slots running a child / idle
//   xmod_worker_metric_points_relayed_total        points the coordinator acknowledged
//   xmod_worker_metric_buffer_points               points waiting for acknowledgement
//   xmod_worker_metric_spilled_points              of those, points waiting in spill files
//   xmod_worker_metric_points_dropped_total{reason="name_too_long"|"refused"|"buffer_full"}
//                                                  points never delivered: a name past the
//                                                  coordinator's limit, buffered when the
//                                                  coordinator refused a report for good, or
//                                                  past the in-memory bound of an attempt
//                                                  whose spill file could not be written
//   xmod_worker_children_stalled_total             children killed for making no step progress
//   xmod_worker_children_started_total             xmod-train children started
//   xmod_worker_children_failed_total              children that ended with FAILED
// Thread-safety: prometheus-cpp metrics are thread-safe.
#ifndef XMOD_WORKER_WORKER_METRICS_H_
#define XMOD_WORKER_WORKER_METRICS_H_

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace xmod {

class WorkerMetrics {
 public:
  // Adds the families to `registry`, which must outlive this object.
  explicit WorkerMetrics(prometheus::Registry& registry);

  prometheus::Gauge& slots_busy;
  prometheus::Gauge& slots_free;
  prometheus::Counter& points_relayed;
  prometheus::Gauge& buffer_points;
  prometheus::Gauge& spilled_points;
  prometheus::Counter& points_dropped_name_too_long;
  prometheus::Counter& points_dropped_refused;
  prometheus::Counter& points_dropped_buffer_full;
  prometheus::Counter& children_started;
  prometheus::Counter& children_failed;
  prometheus::Counter& children_stalled;
};

}  // namespace xmod

#endif  // XMOD_WORKER_WORKER_METRICS_H_
