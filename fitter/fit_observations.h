// The observations a fit reads (paper Eq. 14's points): run curves become per-run
// observations (observations.h), observations that shared runs give twice collapse into one
// (shared_runs.h), and replicates are averaged. Its own module because it composes those two,
// which must not include each other.
#ifndef XMOD_FITTER_FIT_OBSERVATIONS_H_
#define XMOD_FITTER_FIT_OBSERVATIONS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "fitter/observations.h"

namespace xmod::fitter {

// BuildRunObservations, then MergeSharedRuns (observations that several runs of one
// configuration share — the same run listed twice, or one configuration trained twice —
// collapse into one carrying every role they name), then AverageReplicates. Its errors are
// BuildRunObservations'.
absl::StatusOr<std::vector<Observation>> BuildObservations(const std::vector<RunCurve>& runs,
                                                           const ObservationOptions& options = {});

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_FIT_OBSERVATIONS_H_
