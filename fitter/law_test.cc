// The law's features and the capacity convention, checked by hand against the paper.
#include "fitter/law.h"

#include <cmath>

#include "fitter/law_backbones.h"
#include "gtest/gtest.h"

namespace xmod::fitter {
namespace {

// Eq. 14 at K = 1: R_N, P_L and R_{A,K} vanish and the residual offset e remains.
TEST(LawTest, Equation14AtKOneIsTheOffset) {
  const LawParams p = Table8Params();
  EXPECT_DOUBLE_EQ(PredictDelta(p, {556e6, 1.0, 2048, 1, 1}), p.e);
  EXPECT_DOUBLE_EQ(PredictDelta(p, {556e6, 1.0, 32768, 1, 3}), p.e);
}

// The dense model is its own matched-dense reference (B.5): Δ = 0, whatever e is; sparse
// candidates take Eq. 14.
TEST(LawTest, CandidateDeltaIsZeroForTheDenseModelAndEq14Otherwise) {
  const LawParams p = Table8Params();
  EXPECT_EQ(CandidateDelta(p, {556e6, 1.0, 2048, 1, 1}), 0.0);
  const LawPoint sparse{556e6, 4.0, 2048, 8, 3};
  EXPECT_EQ(CandidateDelta(p, sparse), PredictDelta(p, sparse));
}

TEST(LawTest, FeaturesFollowEquations11To13) {
  LawParams p = Table8Params();
  const LawPoint x{556e6, 4.0, 2048, 8, 3};
  const LawFeatures f = ComputeFeatures(x, p);
  EXPECT_NEAR(f.r_n, std::pow(556e6, -p.eta_n) * (1 - std::pow(4.0, -p.rho_n)), 1e-12);
  EXPECT_NEAR(f.p_l, std::pow(2048.0, -p.eta_l) * (std::pow(8.0, p.rho_l) - 1), 1e-12);
  EXPECT_NEAR(f.r_ak, (std::pow(8.0, p.rho_k) - 1) * (std::pow(1.5, p.rho_a) - 1), 1e-12);
  EXPECT_NEAR(PredictDelta(p, x), p.e - p.u * f.r_n + p.w * f.p_l - p.z * f.r_ak, 1e-12);
  // A = 1 is the zero-interaction baseline: ω(1) = 1.
  EXPECT_EQ(ComputeFeatures({556e6, 4.0, 2048, 8, 1}, p).r_ak, 0.0);
}

TEST(LawTest, ParamAtCoversTable8InOrder) {
  const LawParams p = Table8Params();
  EXPECT_EQ(ParamAt(p, 0), p.e);
  EXPECT_EQ(ParamAt(p, 4), p.w);
  EXPECT_EQ(ParamAt(p, 9), p.rho_a);
  EXPECT_STREQ(kLawParamNames[6], "rho_l");
}

// Eq. 3: N(K,A)/N_act = (N0 + N1(1 + AK)) / (N0 + N1(1 + A)), layers only.
TEST(BackbonesTest, CapacityRatioCountsLayersOnly) {
  // 28 layers, N0 = 4, A = 1: N1 = 12; K = 8 → 4 + 12·9 = 112 layers → ratio 4.
  absl::StatusOr<double> r = CapacityRatio("556M", 8, 1, 2048);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(*r, 112.0 / 28.0, 1e-9);
  // A4K8: 161 physical layers (docs/design.md) over 28.
  r = CapacityRatio("556M", 8, 4, 32768);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(*r, 161.0 / 28.0, 1e-9);
  EXPECT_EQ(*CapacityRatio("165M", 1, 1, 2048), 1.0);
}

TEST(BackbonesTest, NominalSizesAndNearestPreset) {
  EXPECT_EQ(*NominalActiveParams("556M"), 556e6);
  EXPECT_EQ(*NominalActiveParams("1.65B"), 1.65e9);
  EXPECT_EQ(*NearestPreset(556e6), "556M");
  EXPECT_EQ(*NearestPreset(5.5e8), "556M");
  EXPECT_EQ(*NearestPreset(170e6), "165M");
  absl::StatusOr<std::string> none = NearestPreset(7e12);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("n_act=7e+12"), std::string::npos)
      << none.status().message();
}

// The paper's reading of Table 8 (§3, Fig. 2): at A = 1, N_act = 556M the optimum K is
// shallow (≈ 3) at L = 2k and far larger at 32k.
TEST(LawTest, Table8OptimumMovesWithContext) {
  auto best_k = [](int seq_len) {
    int best = 1;
    double best_delta = 0;
    for (int k = 2; k <= 32; ++k) {
      const double d = PredictDelta(Table8Params(), {556e6, *CapacityRatio("556M", k, 1, seq_len),
                                                     double(seq_len), double(k), 1});
      if (d < best_delta) {
        best = k;
        best_delta = d;
      }
    }
    return best;
  };
  EXPECT_EQ(best_k(2048), 3);
  EXPECT_GE(best_k(32768), 16);
}

}  // namespace
}  // namespace xmod::fitter
