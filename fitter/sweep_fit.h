// The fitter's entry point for the coordinator and xmod-fit: from the runs of a sweep (or
// from ready Δ observations) to a complete fit report — the two-stage fit of Eq. 14,
// grouped cross-validation, an optional bootstrap, out-of-range predictions — and its
// conversion to the API message xmod.v1.Fit. Stateless; thread-compatible (FitSweep may
// run on a background thread; it uses up to options.threads threads for the bootstrap).
#ifndef XMOD_FITTER_SWEEP_FIT_H_
#define XMOD_FITTER_SWEEP_FIT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/dense_interp.h"
#include "fitter/observations.h"
#include "fitter/two_stage.h"
#include "fitter/validation.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod::fitter {

struct SweepFitOptions {
  FitOptions fit;                   // seed (fit.search.seed), DE sizes, exponent bounds
  ObservationOptions observations;  // dense-matching tolerance
  bool cross_validate = true;       // grouped leave-one-group-out refits (B.5)
  int bootstrap_samples = 0;        // 0 = no bootstrap
  int threads = 2;                  // bootstrap threads
};

struct FitReport {
  FitResult fit;                                  // parameters, R²_Δ, RMSE, MAE, at_bound
  std::vector<Observation> observations;          // fitted and held-out (out-of-range) runs
  std::vector<GroupError> cv;                     // empty when not cross-validated
  std::optional<BootstrapResult> bootstrap;       // when bootstrap_samples > 0
  Goodness out_of_range;                          // on held-out runs (n = 0 when none)
  std::map<std::string, LossCurve> dense_curves;  // by DenseGroupName, for loss predictions
  double fit_seconds = 0;                         // wall time of the two-stage fit
  double cv_seconds = 0;                          // ... of all grouped refits
  double bootstrap_seconds = 0;                   // ... of all bootstrap refits
};

// Runs → observations (observations.h) → FitObservations. Any bad input (non-finite
// losses, a sparse run without a dense reference at its L and backbone, too few runs or a
// single K in a stage) is INVALID_ARGUMENT naming the run or group; nothing partial is
// returned, so the caller stores nothing.
absl::StatusOr<FitReport> FitSweep(const std::vector<RunCurve>& runs,
                                   const SweepFitOptions& options);

// The same from ready observations (the CSV path). Cross-validation runs only when folds
// exist (two or more L, N_act or A ≠ 1 groups).
absl::StatusOr<FitReport> FitObservations(std::vector<Observation> observations,
                                          const SweepFitOptions& options);

// The report as the API message, every observation included (with its fitted Δ and its
// cross-validation predictions). id, sweep_id, study_id and created_unix_ms are left for
// the caller.
xmod::v1::Fit ToFitProto(const FitReport& report);

// The law's parameters from the API message (the inverse of what ToFitProto writes).
LawParams LawParamsFromProto(const xmod::v1::LawParams& p);
// ... and the other way.
xmod::v1::LawParams LawParamsToProto(const LawParams& p);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_SWEEP_FIT_H_
