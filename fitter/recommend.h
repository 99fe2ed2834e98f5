// Using a fitted law (paper §3.1): predict Δ and loss of any configuration
// (C, L, N_act, K, A), and choose (K*, A*) = argmin Δ over a candidate grid for a given
// (C, L, N_act), optionally under a cap on total parameters N (the law's answer to "the best
// X-MoD not exceeding an MoE's parameter budget"; B.3's own pick is by measured loss,
// pilot_selection.h). Eq. 14 has no C term: C only
// picks the dense loss the prediction is added to. Pure functions; thread-safe.
#ifndef XMOD_FITTER_RECOMMEND_H_
#define XMOD_FITTER_RECOMMEND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/dense_interp.h"
#include "fitter/law.h"
#include "fitter/validation.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod::fitter {

struct Prediction {
  double flops = 0;
  int seq_len = 0;
  std::string backbone;
  double n_act = 0;
  int k = 1;
  double a = 1;
  double delta = 0;         // predicted Δ (0 for K = 1, the dense reference)
  double loss = 0;          // dense loss at C + Δ; 0 when no dense curve was given
  double total_params = 0;  // N of the configuration (embeddings and head included)
  double delta_low = 0;     // bootstrap 2.5% / 97.5% (equal to delta without bootstrap)
  double delta_high = 0;
};

// Prediction for one configuration. `dense` (may be null) is the dense curve of the same
// L and backbone; `bootstrap` (may be null) gives the interval. INVALID_ARGUMENT naming the
// configuration when the layer plan is impossible (A·K not whole, L < K, unknown
// backbone) or C lies outside the dense curve.
absl::StatusOr<Prediction> Predict(const LawParams& params, double flops, int seq_len,
                                   const std::string& backbone, int k, double a,
                                   const LossCurve* dense = nullptr,
                                   const BootstrapResult* bootstrap = nullptr, int n0 = 4);

struct RecommendQuery {
  double flops = 0;
  int seq_len = 0;
  std::string backbone;
  std::vector<int> ks;          // empty = 1..32 (K = 1 is the dense model)
  std::vector<double> as;       // empty = {0.5, 1, 2, 3, 4, 5}
  double max_total_params = 0;  // 0 = no cap
  int n0 = 4;
};

struct Recommendation {
  Prediction best;
  std::vector<Prediction> candidates;  // every admissible candidate, lowest Δ first
  // Appendix A.3's closed-form K̂ at A = 1 (ApproximateOptimumK, κ from this backbone's
  // A = 1 plan), printed beside the grid's K* as a cross-check; 0 when undefined.
  double closed_form_k = 0;
};

// Evaluates every admissible (K, A) of the grid (plans that cannot be built and, under a
// cap, configurations with N > cap are left out) and returns them best first. The dense
// model (K = 1) is compared at Δ = 0 (CandidateDelta), so a sparse candidate wins only where
// the law predicts a loss below the dense one.
// INVALID_ARGUMENT when no candidate is admissible or the query is malformed.
absl::StatusOr<Recommendation> Recommend(const LawParams& params, const RecommendQuery& query,
                                         const LossCurve* dense = nullptr,
                                         const BootstrapResult* bootstrap = nullptr);

// The API messages (xmod.v1.Prediction, RecommendResponse), as the coordinator's Predict and
// Recommend and xmod-fit --output json print them. delta_low and delta_high are set only
// when there is an interval (a bootstrap); otherwise they stay 0.
xmod::v1::Prediction PredictionToProto(const Prediction& p);
xmod::v1::RecommendResponse RecommendationToProto(const Recommendation& r);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_RECOMMEND_H_
