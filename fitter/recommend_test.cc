// Recommend against the dense option, and Appendix A.3's closed-form K̂ beside the grid,
// on the paper's Table 8 law (no fit needed).
#include "fitter/recommend.h"

#include <cmath>

#include "fitter/law_backbones.h"
#include "gtest/gtest.h"

namespace xmod::fitter {
namespace {

RecommendQuery Query556M(int seq_len) {
  RecommendQuery q;
  q.flops = 1e20;
  q.seq_len = seq_len;
  q.backbone = "556M";
  q.as = {1};
  return q;
}

// Near the crossover: with e raised until the best sparse Δ̂ is +0.001 (still below e),
// the dense model (Δ = 0) must win. Compared against Eq. 14's own K = 1 value, e, the
// sparse candidate would.
TEST(RecommendTest, DenseWinsWhenEverySparseCandidateIsPredictedWorse) {
  LawParams p = Table8Params();
  absl::StatusOr<Recommendation> table8 = Recommend(p, Query556M(2048));
  ASSERT_TRUE(table8.ok()) << table8.status();
  ASSERT_GT(table8->best.k, 1);
  p.e += 0.001 - table8->best.delta;
  absl::StatusOr<Recommendation> shifted = Recommend(p, Query556M(2048));
  ASSERT_TRUE(shifted.ok()) << shifted.status();
  EXPECT_EQ(shifted->best.k, 1);
  EXPECT_EQ(shifted->best.delta, 0.0);
  ASSERT_GE(shifted->candidates.size(), 2u);
  EXPECT_NEAR(shifted->candidates[1].delta, 0.001, 1e-12);
  EXPECT_LT(shifted->candidates[1].delta, p.e);
}

TEST(RecommendTest, DenseCandidateHasTheDenseLoss) {
  absl::StatusOr<LossCurve> dense = LossCurve::Create({{1e19, 3.0}, {1e21, 2.5}}, "dense");
  ASSERT_TRUE(dense.ok()) << dense.status();
  absl::StatusOr<Prediction> d = Predict(Table8Params(), 1e20, 2048, "556M", 1, 1, &*dense);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->delta, 0.0);
  EXPECT_EQ(d->loss, *dense->LossAt(1e20));
}

// A full-law fit (Eq. 24) predicts with its exposure term: C gives D_D, the plan D/D_D.
TEST(RecommendTest, FullLawPredictionsIncludeTheExposureTerm) {
  LawParams full = Table8Params();
  full.v = 0.3;
  full.eta_d = 0.3;
  full.rho_d = 1.0;
  absl::StatusOr<Prediction> with = Predict(full, 1e20, 32768, "556M", 16, 1);
  absl::StatusOr<Prediction> without = Predict(Table8Params(), 1e20, 32768, "556M", 16, 1);
  ASSERT_TRUE(with.ok() && without.ok());
  const TokenExposure e = *ExposureOf("556M", 16, 1, 32768);
  const double p_d = std::pow(1e20 * e.dense_tokens_per_flop / 1e9, -0.3) * (1 / e.ratio - 1);
  EXPECT_NEAR(with->delta, without->delta + 0.3 * p_d, 1e-12);
  EXPECT_LT(with->delta, without->delta);  // more tokens than the dense reference: a reward
}

// A.3: K̂ = [ρ_N c_N L^{η_L} / (ρ_L c_L N_act^{η_N})]^{1/(ρ_N+ρ_L)}, c_N = u κ^{−ρ_N}, c_L = w;
// on the 556M A = 1 plan (28 layers, N0 = 4, N1 = 12) κ = 12/28.
TEST(RecommendTest, ClosedFormOptimumBesideTheGrid) {
  const LawParams p = Table8Params();
  const double kappa = 12.0 / 28.0;
  auto expected = [&](double l) {
    const double c_n = p.u * std::pow(kappa, -p.rho_n);
    return std::pow(
        p.rho_n * c_n * std::pow(l, p.eta_l) / (p.rho_l * p.w * std::pow(556e6, p.eta_n)),
        1 / (p.rho_n + p.rho_l));
  };
  EXPECT_NEAR(ApproximateOptimumK(p, 556e6, 2048, kappa), expected(2048), 1e-9);
  for (int l : {2048, 32768}) {
    absl::StatusOr<Recommendation> r = Recommend(p, Query556M(l));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NEAR(r->closed_form_k, expected(l), 1e-9) << l;
    EXPECT_EQ(RecommendationToProto(*r).closed_form_k(), r->closed_form_k);
  }
  // The large-K approximation N(K,1)/N_act ≈ κK drops the plan's fixed layers, so K̂ runs
  // above the grid at short L (≈ 5 against K* = 3 at 2k) and agrees better at 32k.
  EXPECT_NEAR(expected(2048), 4.95, 0.05);
  EXPECT_NEAR(expected(32768), 22.8, 0.1);
  LawParams flat = p;
  flat.w = 0;  // no context correction: Δ_K falls forever, no interior minimum
  EXPECT_EQ(ApproximateOptimumK(flat, 556e6, 2048, kappa), 0.0);
}

}  // namespace
}  // namespace xmod::fitter
