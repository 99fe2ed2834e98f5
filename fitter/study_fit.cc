// A study's fit over several sweeps. See study_fit.h.
#include "fitter/study_fit.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fitter/shared_runs.h"

namespace xmod::fitter {

absl::StatusOr<std::vector<Observation>> StudyObservations(
    const std::vector<StudyMemberRuns>& members, const ObservationOptions& options) {
  std::vector<Observation> observations;
  for (const StudyMemberRuns& member : members) {
    absl::StatusOr<std::vector<Observation>> obs = BuildRunObservations(member.runs, options);
    if (!obs.ok()) {
      return absl::Status(obs.status().code(),
                          absl::StrCat(member.name, ": ", obs.status().message()));
    }
    for (Observation& o : *obs) {
      if (member.role.has_value()) o.sweeps = {*member.role};
      observations.push_back(std::move(o));
    }
  }
  // A run two members share (the same run, or the same configuration trained by each) is
  // one observation in both roles: B.4 counts it once.
  return AverageReplicates(MergeSharedRuns(std::move(observations)));
}

absl::StatusOr<FitReport> FitStudy(const std::vector<StudyMemberRuns>& members,
                                   const SweepFitOptions& options) {
  absl::StatusOr<std::vector<Observation>> observations =
      StudyObservations(members, options.observations);
  if (!observations.ok()) return observations.status();
  std::vector<RunCurve> all_runs;
  for (const StudyMemberRuns& member : members) {
    all_runs.insert(all_runs.end(), member.runs.begin(), member.runs.end());
  }
  absl::StatusOr<std::map<std::string, LossCurve>> dense = DenseCurves(all_runs);
  if (!dense.ok()) return dense.status();
  absl::StatusOr<FitReport> report = FitObservations(*std::move(observations), options);
  if (!report.ok()) return report.status();
  report->dense_curves = *std::move(dense);
  return report;
}

}  // namespace xmod::fitter
