// The fit of a study: one two-stage fit (two_stage.h, by sweep as B.5 prescribes)
// over the runs of several sweeps, each member sweep in a role of the paper's B.4 design.
// Observations are built per member, so a sparse run is matched with a dense reference of
// its own sweep even where several sweeps share an (L, backbone); then every observation of
// a member with a role takes that role (overriding its grid label), a configuration several
// members share (same backbone, L, K, A, N0, budget and seed) becomes one observation
// carrying every member's role (MergeSharedRuns, shared_runs.h: the first member's run is
// kept), replicates are averaged, and the union is fitted with FitObservations
// (sweep_fit.h). Stateless; thread-compatible.
#ifndef XMOD_FITTER_STUDY_FIT_H_
#define XMOD_FITTER_STUDY_FIT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/observations.h"
#include "fitter/sweep_fit.h"

namespace xmod::fitter {

// One member sweep of a study.
struct StudyMemberRuns {
  std::string name;               // e.g. "sweep 3 (kxl)"; prefixes error messages
  std::vector<RunCurve> runs;     // its succeeded runs
  std::optional<SweepRole> role;  // every observation's sweep; nullopt: its label's
};

// The study's observations: each member's own (BuildRunObservations on its runs), every one
// taking the member's role where it has one, then shared runs merged (MergeSharedRuns) and
// replicates averaged (AverageReplicates). Errors name the member.
absl::StatusOr<std::vector<Observation>> StudyObservations(
    const std::vector<StudyMemberRuns>& members, const ObservationOptions& options);

// Errors as FitSweep, those of one member's observations prefixed with its name.
// report.dense_curves holds every member's dense curves (per group the one reaching the most
// FLOPs, as DenseCurves).
absl::StatusOr<FitReport> FitStudy(const std::vector<StudyMemberRuns>& members,
                                   const SweepFitOptions& options);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_STUDY_FIT_H_
