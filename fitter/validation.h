// Out-of-sample validation of the two-stage fit (paper B.5, §4.2): grouped
// leave-one-group-out refits and a bootstrap over runs.
//
// Groups. When observations carry explicit groups (Observation::groups, e.g. the CSV
// `group` column), every distinct label is one fold. Otherwise the folds follow B.4/B.5:
//  - leave-one-context-out "L=<L>": the A = 1 runs at that L on the context-sweep backbone
//    (the backbone with the most distinct L values);
//  - leave-one-scale-out "N_act=<backbone>": the A = 1 runs of that backbone at the
//    scale-sweep context (the L with the most distinct backbones);
//  - leave-one-anchor-stride-out "A=<A>": the runs with that A ≠ 1 (A = 1 is the
//    zero-interaction baseline, never a held-out group).
// Each fold refits both stages without its runs and reports the RMSE on loss of the held
// out runs. Deterministic under the seed; the bootstrap spreads refits over threads, each
// refit seeded by its index, so results do not depend on the thread count.
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
};

// The folds over the observations that are not held out (see top of file).
std::vector<CvFold> MakeCvFolds(const std::vector<Observation>& observations);

struct GroupError {
  std::string group;
  double rmse = 0;  // RMSE on loss of the held-out runs under the refit
  int n = 0;
  std::string error;  // non-empty when the refit without the group failed (rmse unset)
};

// One refit per fold. Fails only if `folds` is empty; a fold whose refit fails (e.g. a
// stage left with too few runs) carries its error.
absl::StatusOr<std::vector<GroupError>> CrossValidate(const std::vector<Observation>& observations,
                                                      const std::vector<CvFold>& folds,
                                                      const FitOptions& options);

struct BootstrapResult {
  int samples = 0;               // successful refits
  int failures = 0;              // resamples whose refit failed (e.g. a single K in a stage)
  std::vector<LawParams> draws;  // one per successful refit, in resample order
  LawParams low;                 // 2.5% quantile per parameter
  LawParams high;                // 97.5% quantile per parameter
};

// `samples` resamples (with replacement) of the fitted runs, each refit with seed
// options.search.seed + 1 + i, spread over `threads` threads. FAILED_PRECONDITION when
// fewer than half of the refits succeed.
absl::StatusOr<BootstrapResult> Bootstrap(const std::vector<Observation>& observations, int samples,
                                          int threads, const FitOptions& options);

// The 2.5% and 97.5% quantiles of Δ over the bootstrap draws at `x`.
std::pair<double, double> DeltaInterval(const BootstrapResult& bootstrap, const LawPoint& x);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_VALIDATION_H_
