// The practical X-MoD scaling law (paper §3.3, Eq. 14; features Eqs. 11-13):
//
//   Δ(C, L, N_act, K, A) ≈ e − u·R_N + w·P_L − z·R_{A,K}
//   R_N     = N_act^{−η_N} · [1 − (N(K,A)/N_act)^{−ρ_N}]                      (Eq. 11)
//   P_L     = L^{−η_L} · [(L_s/L)^{−ρ_L} − 1] = L^{−η_L} · (K^{ρ_L} − 1)        (Eq. 12)
//   R_{A,K} = (K^{ρ_K} − 1) · [ω(A)^{ρ_A} − 1],  ω(A) = 2A/(A+1)              (Eq. 13)
//
// Capacity convention (kept everywhere in fitter/): the paper's Eq. 3 counts layers only,
// N(K,A) = N_layer·(N0 + N1·(1 + A·K)). We therefore take N(K,A)/N_act as the ratio of
// physical layer parameters to active-equivalent layer parameters from the accounting
// library (per-layer params × physical layers / active params): embeddings, head and
// routers are excluded. The N_act that enters N_act^{−η_N} is the backbone's nominal size
// (the paper's labels 165M … 1.65B; Table 8's u absorbs that unit), see law_backbones.h.
//
// The full candidate law (Appendix A.2, Eq. 24) adds the exposure correction:
//   Δ ≈ e − u·R_N + v·P_D + w·P_L − z·R_{A,K},   u, v, w, z ≥ 0
//   P_D = D_D^{−η_D} · [(D/D_D)^{−ρ_D} − 1]
// where, at matched training compute C, D = C/φ_X-MoD and D_D = C/φ_dense are the tokens
// the sparse run and its dense reference see (A.2's compute-to-token relation), D_D in
// billions of tokens (v absorbs that unit, as u and w absorb theirs, C.1). The paper does
// not print P_D; this is Eqs. 11-12's template (the dense reference's scale to a negative
// power times a ratio's power, anchored to 0 at the dense point) with v ≥ 0 as A.2 states
// (docs/paper-fidelity.md, "The full candidate law"). X-MoD sees more tokens than its dense
// reference (φ_X-MoD < φ_dense), so v·P_D <= 0 rewards the extra exposure. Eq. 14 is the
// nested reduced form v = 0, which C.1 keeps; LawParams defaults to it.
// All functions are pure and thread-safe.
#ifndef XMOD_FITTER_LAW_H_
#define XMOD_FITTER_LAW_H_

#include <array>
#include <string>

namespace xmod::fitter {

// Paper Table 8 names. Linear coefficients: e (free), u, w, z (>= 0). Exponents: the rest.
struct LawParams {
  double e = 0;
  double u = 0;
  double eta_n = 0;
  double rho_n = 0;
  double w = 0;
  double eta_l = 0;
  double rho_l = 0;
  double z = 0;
  double rho_k = 0;
  double rho_a = 0;
  // The exposure correction of the full candidate law (Eq. 24); v = 0 is Eq. 14.
  double v = 0;
  double eta_d = 0;
  double rho_d = 0;
};

// The parameter names in Table 8 order, and access by that index (0..9); then the
// exposure term's, kExposureParamNames (10..12), which only the full candidate law fits.
inline constexpr std::array<const char*, 10> kLawParamNames = {
    "e", "u", "eta_n", "rho_n", "w", "eta_l", "rho_l", "z", "rho_k", "rho_a"};
inline constexpr std::array<const char*, 3> kExposureParamNames = {"v", "eta_d", "rho_d"};
inline constexpr int kAllParamCount = kLawParamNames.size() + kExposureParamNames.size();
double& ParamAt(LawParams& p, int index);
double ParamAt(const LawParams& p, int index);

// The paper's fitted values (Table 8).
LawParams Table8Params();

// The unit of D_D in P_D (Eq. 24): billions of tokens.
inline constexpr double kTokenUnit = 1e9;

// One configuration as the law sees it.
struct LawPoint {
  double n_act = 0;           // nominal active-equivalent parameters, e.g. 556e6
  double capacity_ratio = 1;  // N(K,A)/N_act (>= 1), layers only (see top of file)
  double seq_len = 0;         // L in tokens
  double k = 1;               // token sparsity K
  double a = 1;               // anchor stride A
  double exposure = 1;        // D/D_D, tokens seen relative to the dense reference (Eq. 24)
  double dense_tokens = 0;    // D_D = C/φ_dense in tokens; 0 when C is unknown (P_D = 0)
};

// The three features at the exponents held in `p` (its linear coefficients are ignored).
struct LawFeatures {
  double r_n = 0;   // Eq. 11
  double p_l = 0;   // Eq. 12
  double r_ak = 0;  // Eq. 13
  double p_d = 0;   // Eq. 24's exposure correction (0 without dense_tokens)
};
LawFeatures ComputeFeatures(const LawPoint& x, const LawParams& p);

// Δ predicted by Eq. 14, as written (plus v·P_D when p.v != 0: Eq. 24): every feature
// vanishes at K = 1 (N(1,A) = N_act, K^ρ − 1 = 0, D = D_D), so Δ(K = 1) = e, the law's
// residual offset. The fit never evaluates K = 1: its observations are sparse runs, K >= 2
// (observations.h).
double PredictDelta(const LawParams& p, const LawPoint& x);

// Δ of a configuration one could train, for choosing among them (§3.1): the dense model
// (K = 1) is its own matched-dense reference, Δ = L − L̂_dense = 0 exactly (B.5:
// L̂ = L̂_dense + Δ̂), not the law's e; every sparse configuration (K >= 2) takes Eq. 14
// (docs/paper-fidelity.md, "Δ at K = 1").
double CandidateDelta(const LawParams& p, const LawPoint& x);

// The approximate optimum sparsity of Appendix A.3, in closed form. A.3 keeps the law
// without R_{A,K} (exact at A = 1, where R_{A,K} = 0) and takes N(K,A)/N_act ≈ κ·K for
// K ≫ 1 (Eq. 3: κ = A·N1/(N0 + N1(1 + A)), the ratio's slope in K). The K-dependent part is
// then §3.3's Δ_K ≈ c_N/(N_act^{η_N} K^{ρ_N}) + c_L K^{ρ_L}/L^{η_L}, with c_N = u·κ^{−ρ_N} and
// c_L = w, and dΔ_K/dK = 0 gives
//   K̂ = [ρ_N c_N L^{η_L} / (ρ_L c_L N_act^{η_N})]^{1/(ρ_N + ρ_L)}.
// A cross-check of Recommend's grid search at A = 1, not a replacement: the grid uses the
// exact N(K,A)/N_act and integer K. 0 when the reduced law has no interior minimum
// (u, w, ρ_N or ρ_L is 0) or κ <= 0.
double ApproximateOptimumK(const LawParams& p, double n_act, double seq_len, double kappa);

// ω(A) = 2A/(A+1), the anchor-stride sparse-equivalent share doubled (Appendix A.1).
double AnchorShare(double a);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_LAW_H_
