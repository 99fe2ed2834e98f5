// Out-of-sample validation of the two-stage fit (paper B.5, §4.2): grouped
// leave-one-group-out refits and a bootstrap over runs.
//
// Groups. When observations carry explicit groups (Observation::groups, e.g. the CSV
// `group` column), every distinct label is one fold, refitting both stages. Otherwise the
// folds follow B.4/B.5. When the observations name their sweeps (two_stage.h, by sweep):
//  - leave-one-context-out "L=<L>": scores the kxl rows at that L; refits both stages
//    without every row at that L, whichever sweep lists it ("we hold out all sparse runs
//    with one sequence length L", B.5): at L = 32k the nact and axk rows leave the refit too
//    (CvFold::excluded) and stage 2, left without rows, is skipped;
//  - leave-one-scale-out "N_act=<backbone>": scores the nact rows of that backbone; refits
//    both stages without every row of that backbone (at 556M the whole kxl sweep, at 165M
//    the axk sweep);
//  A run two sweeps share is one observation (shared_runs.h), so no fold keeps a held-out
//  configuration's twin in its training set;
//  - leave-one-anchor-stride-out "A=<A>": the axk rows with that A ≠ 1; refits stage 2
//    only, stage 1 staying the full fit's (its data do not change). The A = 1 rows are the
//    zero-interaction baseline, never a held-out group.
// Without sweeps (one sweep fitted by A):
//  - "L=<L>": the A = 1 runs at that L on the context-sweep backbone (the backbone with
//    the most distinct L values);
//  - "N_act=<backbone>": the A = 1 runs of that backbone at the scale-sweep context (the
//    L with the most distinct backbones);
//  - "A=<A>": the runs with that A ≠ 1; each fold refits both stages.
// A kind of fold exists when it has two or more groups. Each fold reports the RMSE on loss
// of its held-out runs under the refit (FittedDelta: a held-out A group of the axk sweep
// is predicted with that sweep's offset e_stage2). Deterministic under the seed; the bootstrap
// spreads refits over threads, each refit seeded by its index, so results do not depend on the
// thread count.
#ifndef XMOD_FITTER_VALIDATION_H_
#define XMOD_FITTER_VALIDATION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/law.h"
#include "fitter/observations.h"
#include "fitter/two_stage.h"

namespace xmod::fitter {

struct CvFold {
  std::string group;         // "L=2048", "N_act=165M", "A=2" or an explicit label
  std::vector<int> indices;  // into the observation vector
  bool stage2_only = false;  // refit stage 2 only (leave-one-A-out by sweep)
  // Rows that leave the refit with the group without being scored: another sweep's rows at
  // the held-out L or N_act (by sweep; see top of file).
  std::vector<int> excluded;
};

// The folds over the observations that are not held out (see top of file).
std::vector<CvFold> MakeCvFolds(const std::vector<Observation>& observations);

struct GroupError {
  std::string group;
  double rmse = 0;  // RMSE on loss of the held-out runs under the refit
  int n = 0;
  std::string error;  // non-empty when the refit without the group failed (rmse unset)
  // The held-out runs (indices into the observation vector) and their Δ under the refit
  // (FittedDelta); both empty when the refit failed.
  std::vector<int> indices;
  std::vector<double> predicted_delta;
};

// One refit per fold. Fails only if `folds` is empty; a fold whose refit fails (e.g. a
// stage left with too few runs) carries its error. A stage2_only fold keeps stage 1 of
// `full_fit` (the fit on all observations); without it, that fold refits both stages
// (the same stage 1 under the same seed, at the cost of a search).
absl::StatusOr<std::vector<GroupError>> CrossValidate(const std::vector<Observation>& observations,
                                                      const std::vector<CvFold>& folds,
                                                      const FitOptions& options,
                                                      const FitResult* full_fit = nullptr);

struct BootstrapResult {
  int samples = 0;               // successful refits
  int failures = 0;              // resamples whose refit failed (e.g. a single K in a stage)
  std::vector<LawParams> draws;  // one per successful refit, in resample order
  LawParams low;                 // 2.5% quantile per parameter
  LawParams high;                // 97.5% quantile per parameter
};

// `samples` resamples (with replacement) of the fitted runs, each refit with seed
// options.search.seed + 1 + i, spread over `threads` threads. FAILED_PRECONDITION when
// fewer than half of the refits succeed; CANCELLED when options.search.cancel fired (so do
// CrossValidate and FitTwoStage).
absl::StatusOr<BootstrapResult> Bootstrap(const std::vector<Observation>& observations, int samples,
                                          int threads, const FitOptions& options);

// The 2.5% and 97.5% quantiles of Δ over the bootstrap draws at `x`.
std::pair<double, double> DeltaInterval(const BootstrapResult& bootstrap, const LawPoint& x);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_VALIDATION_H_
