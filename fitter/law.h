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
// (the paper's labels 165M … 1.65B; Table 8's u absorbs that unit), see backbones.h.
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
};

// The parameter names in Table 8 order, and access by that index (0..9).
inline constexpr std::array<const char*, 10> kLawParamNames = {
    "e", "u", "eta_n", "rho_n", "w", "eta_l", "rho_l", "z", "rho_k", "rho_a"};
double& ParamAt(LawParams& p, int index);
double ParamAt(const LawParams& p, int index);

// The paper's fitted values (Table 8).
LawParams Table8Params();

// One configuration as the law sees it.
struct LawPoint {
  double n_act = 0;           // nominal active-equivalent parameters, e.g. 556e6
  double capacity_ratio = 1;  // N(K,A)/N_act (>= 1), layers only (see top of file)
  double seq_len = 0;         // L in tokens
  double k = 1;               // token sparsity K
  double a = 1;               // anchor stride A
};

// The three features at the exponents held in `p` (its linear coefficients are ignored).
struct LawFeatures {
  double r_n = 0;   // Eq. 11
  double p_l = 0;   // Eq. 12
  double r_ak = 0;  // Eq. 13
};
LawFeatures ComputeFeatures(const LawPoint& x, const LawParams& p);

// Δ predicted by Eq. 14. K = 1 is the dense reference itself: Δ = 0 exactly there.
double PredictDelta(const LawParams& p, const LawPoint& x);

// ω(A) = 2A/(A+1), the anchor-stride sparse-equivalent share doubled (Appendix A.1).
double AnchorShare(double a);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_LAW_H_
