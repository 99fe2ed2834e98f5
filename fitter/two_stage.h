// The two-stage fit of Eq. 14 (paper Appendix B.5). Stage 1 fits the base law
// (e, u, η_N, ρ_N, w, η_L, ρ_L) where R_{A,K} = 0; stage 2 then fits the anchor-stride
// interaction (z, ρ_K, ρ_A) with the stage-1 parameters fixed. Which rows feed which stage:
//  - by sweep (the paper's protocol; when any observation names its B.4 sweep,
//    Observation::sweeps): stage 1 fits the A = 1 rows of the kxl and nact sweeps; stage 2
//    fits every row of the axk sweep, its A = 1 rows included (they pin the
//    zero-interaction baseline), with an unconstrained offset of its own, e_stage2: "at
//    each stage, the residual offset is unconstrained" (B.5). e_stage2 absorbs a baseline
//    shift between the anchor-stride sweep (165M, 32k) and the stage-1 law; it is a
//    nuisance parameter, reported but never used for predictions (PredictDelta uses e).
//    Every fitted row then needs a sweep; kxl and nact rows must have A = 1.
//  - by A (no observation names a sweep: a single-sweep fit): stage 1 fits the A = 1 rows,
//    stage 2 the A != 1 rows on the stage-1 residual, without an offset of its own.
// In each stage the exponents come from differential evolution + polish (de_search.h)
// minimizing the mean squared residual, and for every candidate the linear coefficients
// are the exact bounded least-squares solution (bounded_lsq.h): offsets free; u, w, z >= 0.
// Without stage-2 rows stage 2 is skipped (z = ρ_K = ρ_A = 0).
// Deterministic under options.search.seed. Thread-compatible.
#ifndef XMOD_FITTER_TWO_STAGE_H_
#define XMOD_FITTER_TWO_STAGE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/de_search.h"
#include "fitter/law.h"
#include "fitter/observations.h"

namespace xmod::fitter {

// Boxes of the exponents. The paper's estimates (Table 8) lie well inside.
struct ExponentBounds {
  double eta_lo = 0, eta_hi = 2;  // η_N, η_L
  // ρ ≥ 0.05: as ρ → 0 the features (K^ρ − 1), 1 − (N/N_act)^−ρ vanish and their
  // coefficient explodes (w → ∞), a degenerate log-law limit that fits A = 1 data and
  // extrapolates wildly to other anchor strides. Table 8's exponents are all ≥ 0.078.
  double rho_lo = 0.05, rho_hi = 3;  // ρ_N, ρ_L, ρ_K, ρ_A
};

// Which candidate law stage 1 fits (law.h): Eq. 14, or Appendix A.2's Eq. 24 with the
// exposure correction v·P_D (v ≥ 0; exponents η_D, ρ_D searched with η_N ... ρ_L). C.1
// compares the two under this same two-stage protocol (law_comparison.h).
enum class LawForm { kReduced, kFull };

struct FitOptions {
  SearchOptions search;  // seed, population, generations, polish
  ExponentBounds bounds;
  // kFull needs every fitted observation's C (Observation::flops > 0) for D_D.
  LawForm law = LawForm::kReduced;
  // Start DE with these exponents in its population (bootstrap refits from the full fit).
  const LawParams* warm_start = nullptr;
  // Skip stage 1 and take e, u, w (and v) and their exponents from here (a leave-one-A-out refit
  // changes only stage 2's data, B.5). Null: fit stage 1.
  const LawParams* fixed_stage1 = nullptr;
};

struct FitResult {
  LawParams params;  // the law; params.e is stage 1's offset
  bool stage2_fitted = false;
  bool by_sweep = false;              // stages assigned by sweep (see top of file)
  double e_stage2 = 0;                // stage 2's own offset (by sweep only; nuisance)
  int n_obs = 0;                      // observations fitted (not held out)
  int n_stage1 = 0;                   // rows of stage 1 (A = 1; by sweep: of kxl and nact)
  int n_stage2 = 0;                   // rows of stage 2 (A ≠ 1; by sweep: of axk)
  double r2 = 0;                      // R²_Δ over the fitted observations (B.5)
  double rmse = 0;                    // RMSE on loss = RMSE on Δ (L̂ = L̂_dense + Δ̂)
  double mae = 0;                     // MAE on loss
  std::vector<std::string> at_bound;  // exponent names that ended on a bound
  long evaluations = 0;               // objective evaluations, both stages
};

// True when any observation names its B.4 sweep: the fit then assigns stages by sweep.
bool UsesSweepRoles(const std::vector<Observation>& observations);

// Fits the observations with held_out == false. INVALID_ARGUMENT naming the stage and its
// rows when a stage has too few observations (stage 1: 8; stage 2: 4), a single K value,
// or (by sweep) no A != 1 row in stage 2; naming the observation for a non-finite Δ, for a
// row without C under LawForm::kFull, and, by sweep, for a row without a sweep or a kxl /
// nact row with A != 1.
absl::StatusOr<FitResult> FitTwoStage(const std::vector<Observation>& observations,
                                      const FitOptions& options);

// R²_Δ, RMSE and MAE of `params` on `observations` (all of them, held out or not).
struct Goodness {
  double r2 = 0, rmse = 0, mae = 0;
  int n = 0;
};
Goodness Evaluate(const LawParams& params, const std::vector<Observation>& observations);

// Δ as the fit models `observation`: the law (PredictDelta), with e_stage2 in place of e for
// a row of the axk sweep alone when the fit was by sweep. In-sample goodness and held-out
// anchor-stride groups are measured so; predictions of new configurations use the law.
double FittedDelta(const FitResult& fit, const Observation& observation);

// Evaluate with FittedDelta.
Goodness EvaluateFit(const FitResult& fit, const std::vector<Observation>& observations);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_TWO_STAGE_H_
