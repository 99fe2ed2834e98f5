// The uncertainty model behind adaptive sweeps (adaptive_design.h) and the design simulator
// (design_sim.h): a point fit of Eq. 14 plus an ensemble of refits on stratified bootstrap
// resamples of the runs, and the answer the ensemble gives to a target question "which
// (K, A) minimises Δ at (C, L, N_act)".
//
// Ensemble. The point fit is FitTwoStage (default search options), refined by a joint
// least-squares fit of all ten parameters over every row (differential evolution over the
// six exponents from the two-stage solution, exact bounded least squares for e, u, w, z).
// The joint refinement matters for adaptive designs: they put most runs at A != 1 near the
// targets' optima, and the two-stage fit would read those rows in stage 2 only, through
// (z, ρ_K, ρ_A), never correcting stage 1's context and capacity terms from them. Each member
// is the joint fit of a resample drawn with replacement within the A = 1 rows and the A != 1
// rows separately (every resample keeps both strata's sizes; a resample whose stratum has a
// single K is redrawn), warm-started from the point fit with a short search (population 16,
// 40 generations, 500 polish evaluations): a few ms per member at 20-100 runs, which is what
// makes one ensemble per decision affordable in the simulator's loop.
// Partial runs: a row named in EnsembleOptions::forecast_sd is a forecast of a run's final Δ;
// every member redraws it from the forecast's distribution, so a partial run informs the
// ensemble only as far as its curve supports.
// Answer. Every member predicts Δ at each admissible (K, A) of the target; the recommendation
// is the Bayes action under the ensemble, argmin of the members' mean Δ (it also minimises the
// members' mean regret, since their mean best Δ does not depend on the choice). p_best is the
// share of members whose own argmin it is; expected_regret the members' mean of Δ_m(rec) −
// min Δ_m. Deterministic under the seed. Thread-compatible.
#ifndef XMOD_FITTER_DESIGN_ENSEMBLE_H_
#define XMOD_FITTER_DESIGN_ENSEMBLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/law.h"
#include "fitter/observations.h"
#include "fitter/two_stage.h"

namespace xmod::fitter {

// The question "which (K, A) minimises Δ here". Eq. 14 has no C term: `flops` names the
// budget the answer is for and the budget of runs that measure it directly.
struct Target {
  double flops = 0;
  int seq_len = 0;
  std::string backbone;
  std::string Describe() const;  // "556M L=4096 C=5e+19"
};

struct EnsembleOptions {
  int members = 32;            // bootstrap refits (>= 2)
  uint64_t seed = 1;           // point fit: seed; member i: seed + 1 + i
  double noise_floor = 0.001;  // lower bound of noise_sd (nats)
  // Refine the point fit and fit the members jointly (see top of file). False: the
  // two-stage fit of the paper's protocol throughout, members warm-started two-stage refits.
  bool joint = true;
  // Observations that are forecasts of a partial run's final Δ (partial_curve.h), by run id:
  // the sd of the forecast. Each member draws such a row's Δ from N(forecast, sd²) after
  // resampling, so the ensemble carries the forecast's uncertainty; the point fit uses the
  // forecast mean. Rows not named here are final measurements.
  std::map<int64_t, double> forecast_sd;
  // Polled before each fit (the point fit, its refinement, every member's refit); once it
  // returns true the ensemble stops and FitEnsemble returns CANCELLED. Empty = never.
  std::function<bool()> cancelled;
};

struct LawEnsemble {
  FitResult fit;                   // the two-stage fit; fit.params: its joint refinement
  std::vector<LawParams> members;  // the refits
  int failures = 0;                // resamples whose refit failed
  // The noise sd of one observation: sqrt(SSE / (n − parameters)) of the joint fit, at
  // least options.noise_floor.
  double noise_sd = 0;
};

// INVALID_ARGUMENT from FitTwoStage when the observations cannot be fitted (e.g. a stage
// with too few rows), or when fewer than half of the members could be refitted; CANCELLED
// once options.cancelled returns true.
absl::StatusOr<LawEnsemble> FitEnsemble(const std::vector<Observation>& observations,
                                        const EnsembleOptions& options);

// The admissible (K, A) of a target over `ks` x `as` (K >= 2 sparse; K = 1, when listed, is
// the dense model with Δ = 0) and their law points. INVALID_ARGUMENT naming the target when
// the backbone is unknown or no option can be built.
struct TargetOptions {
  Target target;
  std::vector<int> k;
  std::vector<double> a;
  std::vector<LawPoint> points;
};
absl::StatusOr<TargetOptions> MakeTargetOptions(const Target& target, const std::vector<int>& ks,
                                                const std::vector<double>& as);

struct TargetAnswer {
  Target target;
  int k = 1;
  double a = 1;
  double delta = 0;            // members' mean Δ at (k, a)
  double delta_sd = 0;         // members' sd of Δ at (k, a)
  double p_best = 0;           // share of members whose argmin is (k, a)
  double expected_regret = 0;  // members' mean of Δ_m(k, a) − min Δ_m (nats)
  // The claim at confidence `confidence`: the members' q-quantile of that regret
  // (design_evidence.h RegretQuantile); set by Decide, 0 elsewhere.
  double regret_bound = 0;
  double confidence = 0;
};

// The members' Δ at every option (CandidateDelta: 0 for the dense model): [member][option].
std::vector<std::vector<double>> MemberDeltas(const std::vector<LawParams>& members,
                                              const std::vector<LawPoint>& points);

// The Bayes action of members weighted by `weights` (same size as `deltas`; summing to 1).
TargetAnswer AnswerTarget(const TargetOptions& options,
                          const std::vector<std::vector<double>>& deltas,
                          const std::vector<double>& weights);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_DESIGN_ENSEMBLE_H_
