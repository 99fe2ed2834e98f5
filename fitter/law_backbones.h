// Backbone facts the law needs, taken from the accounting library (model/accounting):
// the nominal N_act of a preset, the nearest preset to a parameter count, the capacity
// ratio N(K,A)/N_act of an X-MoD layer plan and its total parameters N.
// Convention (law.h): N(K,A)/N_act counts layers only (paper Eq. 3); N for a parameter
// cap (paper B.3) is the accounting's total, embeddings and head included (Table 6 "N").
// All functions are pure and thread-safe.
#ifndef XMOD_FITTER_LAW_BACKBONES_H_
#define XMOD_FITTER_LAW_BACKBONES_H_

#include <string>

#include "absl/status/statusor.h"

namespace xmod::fitter {

// Dense prefix used for every law point (docs/design.md "Model": N0 = 4 by default).
inline constexpr int kDefaultN0 = 4;

// The nominal active size of a preset from its name: "556M" -> 556e6, "1.65B" -> 1.65e9,
// "tiny-2m" -> 2e6. Names without a size suffix fall back to the dense model's total
// parameters from the accounting. NOT_FOUND / INVALID_ARGUMENT for unknown presets.
absl::StatusOr<double> NominalActiveParams(const std::string& backbone);

// The preset (of BackbonePresetNames()) whose nominal size is nearest to `n_act` in log
// scale; INVALID_ARGUMENT when none lies within 10% of it.
absl::StatusOr<std::string> NearestPreset(double n_act);

// N(K,A)/N_act of the X-MoD plan [Dense]xN0 + ([Sparse(K)]xAK + [Dense])xN1 on `backbone`:
// per-layer params x physical layers / active params. Errors from the accounting
// (A*K not whole, L/K < 1, ...) come back with the configuration named.
absl::StatusOr<double> CapacityRatio(const std::string& backbone, int k, double a, int seq_len,
                                     int n0 = kDefaultN0);

// Total parameters N (embeddings and head included) of that plan; K = 1 is the dense model.
absl::StatusOr<double> TotalParams(const std::string& backbone, int k, double a, int seq_len,
                                   int n0 = kDefaultN0);

// Token exposure at matched training compute (Appendix A.2's compute-to-token relation,
// D = C/φ): `ratio` = D/D_D = φ_dense/φ_X-MoD, the tokens the plan sees relative to its
// dense reference at the same C, and the dense reference's tokens per training FLOP,
// 1/φ_dense. φ is the accounting's training FLOPs per token at L, the same counter for
// Dense and X-MoD (B.1), at the default multiplier (3 x forward; a different one scales
// every D_D alike, which v absorbs). K = 1 is the dense model: ratio 1.
struct TokenExposure {
  double ratio = 1;
  double dense_tokens_per_flop = 0;
};
absl::StatusOr<TokenExposure> ExposureOf(const std::string& backbone, int k, double a, int seq_len,
                                         int n0 = kDefaultN0);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_LAW_BACKBONES_H_
