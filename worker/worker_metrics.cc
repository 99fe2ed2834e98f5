#include "worker/worker_metrics.h"

#include "common/build_metrics.h"

namespace xmod {
namespace {

prometheus::Family<prometheus::Gauge>& SlotFamily(prometheus::Registry& registry) {
  return prometheus::BuildGauge()
      .Name("xmod_worker_slots")
      .Help("Slots of this worker by state (busy: running an xmod-train child).")
      .Register(registry);
}

prometheus::Family<prometheus::Counter>& DroppedFamily(prometheus::Registry& registry) {
  return prometheus::BuildCounter()
      .Name("xmod_worker_metric_points_dropped_total")
      .Help(
          "Metric points never delivered, by reason (name_too_long: the name is past the "
          "coordinator's limit; refused: buffered when the coordinator refused a report of "
          "the attempt for good; buffer_full: past the in-memory bound of an attempt whose "
          "spill file could not be written).")
      .Register(registry);
}

}  // namespace

WorkerMetrics::WorkerMetrics(prometheus::Registry& registry)
    : slots_busy(SlotFamily(registry).Add({{"state", "busy"}})),
      slots_free(SlotFamily(registry).Add({{"state", "free"}})),
      points_relayed(prometheus::BuildCounter()
                         .Name("xmod_worker_metric_points_relayed_total")
                         .Help("Metric points the coordinator acknowledged as durable.")
                         .Register(registry)
                         .Add({})),
      buffer_points(prometheus::BuildGauge()
                        .Name("xmod_worker_metric_buffer_points")
                        .Help("Metric points buffered, waiting for acknowledgement.")
                        .Register(registry)
                        .Add({})),
      spilled_points(prometheus::BuildGauge()
                         .Name("xmod_worker_metric_spilled_points")
                         .Help("Buffered metric points waiting in spill files on disk.")
                         .Register(registry)
                         .Add({})),
      points_dropped_name_too_long(DroppedFamily(registry).Add({{"reason", "name_too_long"}})),
      points_dropped_refused(DroppedFamily(registry).Add({{"reason", "refused"}})),
      points_dropped_buffer_full(DroppedFamily(registry).Add({{"reason", "buffer_full"}})),
      children_started(prometheus::BuildCounter()
                           .Name("xmod_worker_children_started_total")
                           .Help("xmod-train children started.")
                           .Register(registry)
                           .Add({})),
      children_failed(prometheus::BuildCounter()
                          .Name("xmod_worker_children_failed_total")
                          .Help("xmod-train children whose attempt ended FAILED.")
                          .Register(registry)
                          .Add({})),
      children_stalled(prometheus::BuildCounter()
                           .Name("xmod_worker_children_stalled_total")
                           .Help("xmod-train children killed for making no step progress.")
                           .Register(registry)
                           .Add({})) {
  AddBuildInfoGauge(registry);
}

}  // namespace xmod
