// Forecasts of what a sweep costs (docs/operations.md, "Forecasts"): each planned run's tokens
// over the training speed this cluster measured on SUCCEEDED runs like it, in slot-hours per
// device kind, and the wall time the cluster's slots would take. Served with a dry-run
// SubmitSweep (`xmodctl sweep submit --dry_run`). Pure: the measurements and slot counts come
// from the store (store/run_throughput.h).
//
// A planned run goes by, first, finished runs of the same model (every ModelSpec field), seq_len
// and precision, on either device kind (CUDA preferred), and else by runs of the same backbone,
// architecture, seq_len and precision with other model options (K, A, experts); each figure
// says which. Speeds are compared per rank (a run's tokens/s over its ranks) and taken as the
// median of its matches, so a 4-rank forecast from 1-rank runs assumes linear scaling.
#ifndef XMOD_COORDINATOR_API_SWEEP_FORECAST_H_
#define XMOD_COORDINATOR_API_SWEEP_FORECAST_H_

#include <vector>

#include "coordinator/store/run_throughput.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {

// The forecast of `runs` (expanded, as SubmitSweepResponse.runs) from `measured` and `slots`.
xmod::v1::SweepForecast ForecastSweep(const std::vector<xmod::v1::Run>& runs,
                                      const std::vector<ThroughputSample>& measured,
                                      const SlotCounts& slots);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_SWEEP_FORECAST_H_
