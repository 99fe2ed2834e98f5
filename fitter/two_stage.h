// The two-stage fit of Eq. 14 (paper Appendix B.5). Stage 1 fits the base law
// (e, u, η_N, ρ_N, w, η_L, ρ_L) on the A = 1 observations, where R_{A,K} = 0; stage 2 fits
// the anchor-stride interaction (z, ρ_K, ρ_A) on the A ≠ 1 observations with the stage-1
// parameters fixed (the A = 1 rows have a zero stage-2 feature and do not move it).
// In each stage the exponents come from differential evolution + polish (de_search.h)
// minimizing the mean squared residual, and for every candidate the linear coefficients
// are the exact bounded least-squares solution (bounded_lsq.h): e free; u, w, z >= 0.
// Without A ≠ 1 observations stage 2 is skipped (z = ρ_K = ρ_A = 0).
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

struct FitOptions {
  SearchOptions search;  // seed, population, generations, polish
  ExponentBounds bounds;
  // Start DE with these exponents in its population (bootstrap refits from the full fit).
  const LawParams* warm_start = nullptr;
};

struct FitResult {
  LawParams params;
  bool stage2_fitted = false;
  int n_obs = 0;                      // observations fitted (not held out)
  int n_stage1 = 0;                   // of which A = 1
  int n_stage2 = 0;                   // of which A ≠ 1
  double r2 = 0;                      // R²_Δ over the fitted observations (B.5)
  double rmse = 0;                    // RMSE on loss = RMSE on Δ (L̂ = L̂_dense + Δ̂)
  double mae = 0;                     // MAE on loss
  std::vector<std::string> at_bound;  // exponent names that ended on a bound
  long evaluations = 0;               // objective evaluations, both stages
};

// Fits the observations with held_out == false. INVALID_ARGUMENT naming the stage and its
// group when a stage has too few observations (stage 1: 8; stage 2: 4), a single K value,
// or a non-finite Δ (naming the observation).
absl::StatusOr<FitResult> FitTwoStage(const std::vector<Observation>& observations,
                                      const FitOptions& options);

// R²_Δ, RMSE and MAE of `params` on `observations` (all of them, held out or not).
struct Goodness {
  double r2 = 0, rmse = 0, mae = 0;
  int n = 0;
};
Goodness Evaluate(const LawParams& params, const std::vector<Observation>& observations);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_TWO_STAGE_H_
