// The observations a fit reads: see fit_observations.h.
#include "fitter/fit_observations.h"

#include <utility>

#include "fitter/shared_runs.h"

namespace xmod::fitter {

absl::StatusOr<std::vector<Observation>> BuildObservations(const std::vector<RunCurve>& runs,
                                                           const ObservationOptions& options) {
  absl::StatusOr<std::vector<Observation>> observations = BuildRunObservations(runs, options);
  if (!observations.ok()) return observations.status();
  return AverageReplicates(MergeSharedRuns(*std::move(observations)));
}

}  // namespace xmod::fitter
