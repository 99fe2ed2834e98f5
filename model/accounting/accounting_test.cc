// Golden tests of the parameter / FLOP accounting against the paper: Table 6 (main
// comparison, L = 32768), Table 1 phi/phi_D, Table 7 / Table 2 controls, Table 9 deep
// models, and the values checked in docs/design.md.
#include "model/accounting/accounting.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/accounting/test_specs.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;
using testing_specs::MoE;
using testing_specs::Spec;
using xmod::v1::DENSE;
using xmod::v1::MOD;
using xmod::v1::ROUTED_FFN;
using xmod::v1::SELECTED_Q_FULL_KV;
using xmod::v1::XMOD;

constexpr int kL = 32768;  // Table 6 reports FLOPs/token at L = 32768

Accounting MustAccount(const xmod::v1::ModelSpec& model, int seq_len = kL) {
  absl::StatusOr<Accounting> acc = Account(model, seq_len);
  EXPECT_TRUE(acc.ok()) << acc.status();
  return acc.ok() ? *acc : Accounting{};
}

// `value` rounded to the two significant digits the paper prints FLOPs with.
double RoundTo2Significant(double value) {
  const double unit = std::pow(10.0, std::floor(std::log10(value)) - 1);
  return std::round(value / unit) * unit;
}

double RelativeError(double ours, double paper) { return std::abs(ours - paper) / paper; }

struct Table6Row {
  const char* label;
  xmod::v1::ModelSpec model;
  int layers;           // Table 6 "Layers"
  double paper_params;  // Table 6 "N"
  double paper_flops;   // Table 6 "FLOPs/tok." (2 significant digits)
  double ours_params;   // what the rule gives (recorded; see the comments on mismatches)
};

class Table6Test : public ::testing::TestWithParam<Table6Row> {};

// Total parameters to 1% and FLOPs/token to the paper's two significant digits (a 1% test
// would be sharper than the table itself: 1.0e10 stands for anything in [0.95e10, 1.05e10)).
TEST_P(Table6Test, MatchesPaper) {
  const Table6Row& row = GetParam();
  const Accounting acc = MustAccount(row.model);
  EXPECT_EQ(acc.layers, row.layers);
  EXPECT_LT(RelativeError(acc.total_params, row.paper_params), 0.01)
      << "ours " << acc.total_params << " paper " << row.paper_params;
  EXPECT_DOUBLE_EQ(RoundTo2Significant(acc.forward_flops_per_token), row.paper_flops)
      << "ours " << acc.forward_flops_per_token;
  EXPECT_LT(RelativeError(acc.total_params, row.ours_params), 1e-4);
  EXPECT_DOUBLE_EQ(acc.train_flops_per_token, 3 * acc.forward_flops_per_token);
}

xmod::v1::ModelSpec MoD(const std::string& backbone) { return Spec(MOD, backbone, 8); }
xmod::v1::ModelSpec XMoD(const std::string& backbone, int k, double a) {
  return Spec(XMOD, backbone, k, a);
}

INSTANTIATE_TEST_SUITE_P(
    Paper, Table6Test,
    ::testing::Values(
        Table6Row{"556M_Dense", Spec(DENSE, "556M"), 28, 0.54e9, 8.4e9, 0.54330e9},
        Table6Row{"556M_MoD", MoD("556M"), 49, 0.87e9, 7.7e9, 0.87370e9},
        Table6Row{"556M_MoE_8_64", MoE("556M", 6, 64, 2), 28, 2.46e9, 8.4e9, 2.46090e9},
        Table6Row{"556M_XMoD_A4K8", XMoD("556M", 8, 4), 161, 2.64e9, 3.9e9, 2.63539e9},
        Table6Row{"556M_MoE_8_128", MoE("556M", 6, 128, 2), 28, 4.58e9, 8.4e9, 4.57675e9},
        Table6Row{"556M_XMoD_A3K16", XMoD("556M", 16, 3), 298, 4.79e9, 3.9e9, 4.79040e9},
        // Table 6 prints the backbone's name "936M" as the Dense N; the same rule that
        // matches every other 936M row to < 0.3% gives 0.914B (28 x 27.13M + 2 x 50257 x
        // 1536). We compare with 0.914B and record the label mismatch here.
        Table6Row{"936M_Dense", Spec(DENSE, "936M"), 28, 0.914e9, 9.0e9, 0.91412e9},
        Table6Row{"936M_MoD", MoD("936M"), 49, 1.48e9, 8.3e9, 1.48391e9},
        Table6Row{"936M_MoE_8_64", MoE("936M", 6, 64, 2), 28, 4.51e9, 9.0e9, 4.50894e9},
        Table6Row{"936M_XMoD_A4K8", XMoD("936M", 8, 4), 161, 4.52e9, 4.6e9, 4.52293e9},
        Table6Row{"936M_MoE_8_128", MoE("936M", 6, 128, 2), 28, 8.48e9, 9.0e9, 8.47520e9},
        Table6Row{"936M_XMoD_A3K16", XMoD("936M", 16, 3), 298, 8.24e9, 4.5e9, 8.24008e9},
        // Likewise "1.65B" is the backbone's name; the rule gives 1.615B.
        Table6Row{"1_65B_Dense", Spec(DENSE, "1.65B"), 28, 1.615e9, 1.0e10, 1.61513e9},
        Table6Row{"1_65B_MoD", MoD("1.65B"), 49, 2.67e9, 9.6e9, 2.67218e9},
        Table6Row{"1_65B_MoE_8_64", MoE("1.65B", 6, 64, 2), 28, 9.28e9, 1.0e10, 9.28181e9},
        Table6Row{"1_65B_XMoD_A4K8", XMoD("1.65B", 8, 4), 161, 8.31e9, 5.9e9, 8.30963e9}),
    [](const ::testing::TestParamInfo<Table6Row>& info) { return info.param.label; });

// The two 1.65B rows run with TP=8 disagree with the rule every other row follows. The rule
// (298 layers x 50.33M + 0.206B embeddings; 28 x (12.58M attention + 130 x 4.72M experts +
// 0.26M router) + 0.206B) gives 15.21B and 17.74B where the paper prints 14.73B and 17.16B:
// both about 3.2-3.4% lower, while A4K8 and MoE 8:64 on the same backbone match to 0.01%.
// No integer layer count (14.73B would need 288.6 layers), no tied embedding and no other
// d_e reproduces them, so we keep the rule and record what it gives. FLOPs still match.
TEST(AccountingTest, Paper165BTensorParallelRowsDifferFromTheRule) {
  const Accounting a3k16 = MustAccount(XMoD("1.65B", 16, 3));
  EXPECT_EQ(a3k16.layers, 298);
  EXPECT_NEAR(a3k16.total_params, 15.2053e9, 0.001e9);
  EXPECT_NEAR(RelativeError(a3k16.total_params, 14.73e9), 0.0323, 0.001);
  EXPECT_DOUBLE_EQ(RoundTo2Significant(a3k16.forward_flops_per_token), 5.8e9);

  const Accounting moe = MustAccount(MoE("1.65B", 6, 128, 2));
  EXPECT_EQ(moe.experts.expert_dim, 768);
  EXPECT_NEAR(moe.total_params, 17.7412e9, 0.001e9);
  EXPECT_NEAR(RelativeError(moe.total_params, 17.16e9), 0.0339, 0.001);
  EXPECT_DOUBLE_EQ(RoundTo2Significant(moe.forward_flops_per_token), 1.0e10);
}

// docs/design.md "Model": the values checked by hand, to 0.5%.
TEST(AccountingTest, ArchitectureCheckedValues) {
  struct Check {
    xmod::v1::ModelSpec model;
    double params, flops;
  };
  for (const Check& c :
       {Check{Spec(DENSE, "556M"), 0.543e9, 8.40e9}, Check{XMoD("556M", 8, 4), 2.635e9, 3.93e9},
        Check{MoD("556M"), 0.874e9, 7.69e9}}) {
    const Accounting acc = MustAccount(c.model);
    EXPECT_LT(RelativeError(acc.total_params, c.params), 0.005) << acc.plan.notation;
    EXPECT_LT(RelativeError(acc.forward_flops_per_token, c.flops), 0.005) << acc.plan.notation;
  }
}

// Exact per-layer counts of the 556M backbone (d 1024, 16 x 128 query, 8 x 128 kv, ffn 3072).
TEST(AccountingTest, PerLayerParameterBreakdown) {
  const Accounting dense = MustAccount(Spec(DENSE, "556M"));
  const double q_o = 2.0 * 1024 * 2048, k_v = 2.0 * 1024 * 1024, ffn = 3.0 * 1024 * 3072;
  EXPECT_DOUBLE_EQ(dense.per_layer_params, q_o + k_v + ffn);
  EXPECT_DOUBLE_EQ(dense.embedding_params, 2.0 * 50257 * 1024);
  EXPECT_DOUBLE_EQ(dense.active_params, 28 * (q_o + k_v + ffn));
  EXPECT_DOUBLE_EQ(dense.forward_flops_per_token,
                   2 * 28 * (q_o + k_v + ffn) + 4.0 * kL * 2048 * 28);
  EXPECT_DOUBLE_EQ(dense.attention_flops_per_token, 4.0 * kL * 2048 * 28);
  EXPECT_DOUBLE_EQ(dense.capacity_ratio, 1.0);

  // X-MoD A4K8: 9 dense + 152 sparse layers; each sparse layer adds its router vector (d).
  const Accounting x = MustAccount(XMoD("556M", 8, 4));
  EXPECT_EQ(x.dense_layers, 9);
  EXPECT_EQ(x.sparse_layers, 152);
  EXPECT_DOUBLE_EQ(x.total_params, 161 * (q_o + k_v + ffn) + 152 * 1024.0 + 2.0 * 50257 * 1024);
  EXPECT_DOUBLE_EQ(x.active_params, dense.active_params);  // 9 + 152/8 = 28 layers
  EXPECT_DOUBLE_EQ(x.forward_flops_per_token,
                   2 * 28 * (q_o + k_v + ffn) + 4.0 * kL * 2048 * (9 + 152.0 / 64));
  EXPECT_DOUBLE_EQ(x.attention_flops_per_token, 4.0 * kL * 2048 * (9 + 152.0 / 64));
}

// Table 1: phi/phi_D to its two decimals.
TEST(AccountingTest, Table1FlopRatios) {
  struct Row {
    xmod::v1::ModelSpec model;
    double paper;
  };
  for (const Row& r :
       {Row{MoD("556M"), 0.92}, Row{XMoD("556M", 8, 4), 0.47}, Row{XMoD("556M", 16, 3), 0.46},
        Row{MoD("936M"), 0.92}, Row{XMoD("936M", 8, 4), 0.51}, Row{XMoD("936M", 16, 3), 0.50},
        Row{MoD("1.65B"), 0.93}, Row{XMoD("1.65B", 8, 4), 0.57}, Row{XMoD("1.65B", 16, 3), 0.56},
        Row{MoE("936M", 6, 64, 2), 1.00}}) {
    absl::StatusOr<double> ratio = FlopRatioToDense(r.model, kL);
    ASSERT_TRUE(ratio.ok()) << ratio.status();
    EXPECT_NEAR(*ratio, r.paper, 0.005) << r.model.ShortDebugString();
  }
}

// Table 7 / B.6 Routed-FFN at 936M: 152 and 288 routed FFN refinements, 28 full-sequence
// attention modules, phi/phi_D = 1.00 exactly, N 3.26B and 5.68B (ours 3.268B, 5.692B:
// within 0.25%).
TEST(AccountingTest, RoutedFfnControl) {
  struct Row {
    int k;
    double a;
    int refinements;
    double paper_params, ours_params;
  };
  const Accounting dense = MustAccount(Spec(DENSE, "936M"));
  for (const Row& r : {Row{8, 4, 152, 3.26e9, 3.26767e9}, Row{16, 3, 288, 5.68e9, 5.69206e9}}) {
    const Accounting acc = MustAccount(Spec(ROUTED_FFN, "936M", r.k, r.a));
    int attention = 0, routed = 0;
    for (LayerKind kind : acc.plan.layers) {
      attention += kind == LayerKind::kDense || kind == LayerKind::kAttention;
      routed += kind == LayerKind::kRoutedFfn;
    }
    EXPECT_EQ(routed, r.refinements);
    EXPECT_EQ(acc.sparse_layers, r.refinements);
    EXPECT_EQ(attention, 28);
    EXPECT_EQ(acc.layers, acc.dense_layers + r.refinements);  // Table 7: depth counts FFNs
    EXPECT_DOUBLE_EQ(acc.forward_flops_per_token, dense.forward_flops_per_token);
    EXPECT_DOUBLE_EQ(acc.active_params, dense.active_params);
    EXPECT_LT(RelativeError(acc.total_params, r.paper_params), 0.01);
    EXPECT_LT(RelativeError(acc.total_params, r.ours_params), 1e-4);
  }
}

// Table 2 / B.6 Selected-Q/full-KV: X-MoD's plan and N, phi/phi_D 1.09 and 1.19. B.6's
// token shares 46.8% / 42.0% are phi_XMoD / phi_SQ from the rounded phis (0.51/1.09,
// 0.50/1.19); unrounded we get 46.3% and 42.0%.
TEST(AccountingTest, SelectedQueryFullKvControl) {
  struct Row {
    int k;
    double a, paper_ratio, token_share;
  };
  for (const Row& r : {Row{8, 4, 1.09, 0.4632}, Row{16, 3, 1.19, 0.4198}}) {
    const Accounting xmod = MustAccount(XMoD("936M", r.k, r.a));
    const Accounting sq = MustAccount(Spec(SELECTED_Q_FULL_KV, "936M", r.k, r.a));
    EXPECT_EQ(sq.layers, xmod.layers);
    EXPECT_DOUBLE_EQ(sq.total_params, xmod.total_params);
    EXPECT_GT(sq.forward_flops_per_token, xmod.forward_flops_per_token);
    EXPECT_GT(sq.active_params, xmod.active_params);  // K/V projections over all tokens
    absl::StatusOr<double> ratio = FlopRatioToDense(Spec(SELECTED_Q_FULL_KV, "936M", r.k, r.a), kL);
    ASSERT_TRUE(ratio.ok());
    EXPECT_NEAR(*ratio, r.paper_ratio, 0.005);
    EXPECT_NEAR(xmod.forward_flops_per_token / sq.forward_flops_per_token, r.token_share, 0.0005);
  }
}

// Table 9: 165M width, 52 active-equivalent layers. The layer counts 124/220/316/412 need
// N0 = 4 (N0 + 24 x (1 + K) layers with N0 + 2 x 24 = 52). The rule gives N = 0.5391B,
// 0.9166B, 1.2942B, 1.6717B: A1K12 and A1K16 match the paper (1.29B, 1.67B); its 552M and
// 939M for A1K4 / A1K8 are 2.4% higher than any plan of that depth allows (the extra
// 12.9M / 22.4M is not a whole number of 3.93M layers). The paper's N/N_act column is its
// rounded N over 256M (5.04 = 1.29B / 256M; unrounded we get 5.057). phi/phi_D match at
// L = 32768.
TEST(AccountingTest, Table9DeepModels) {
  struct Row {
    int k, layers;
    double paper_params, ours_params, paper_ratio, paper_capacity;
  };
  xmod::v1::ModelSpec dense = Spec(DENSE, "165M");
  dense.mutable_backbone()->set_n_layers(52);
  const Accounting deep_dense = MustAccount(dense);
  EXPECT_LT(RelativeError(deep_dense.total_params, 256e6), 0.01);
  for (const Row& r :
       {Row{4, 124, 552e6, 0.539100e9, 0.67, 2.16}, Row{8, 220, 939e6, 0.916637e9, 0.62, 3.67},
        Row{12, 316, 1.29e9, 1.294173e9, 0.60, 5.04},
        Row{16, 412, 1.67e9, 1.671710e9, 0.59, 6.52}}) {
    xmod::v1::ModelSpec model = XMoD("165M", r.k, 1);
    model.mutable_backbone()->set_n_layers(52);
    const Accounting acc = MustAccount(model);
    EXPECT_EQ(acc.plan.n0, 4);
    EXPECT_EQ(acc.layers, r.layers);
    EXPECT_LT(RelativeError(acc.total_params, r.ours_params), 1e-4);
    EXPECT_LT(RelativeError(acc.total_params, r.paper_params), 0.025);
    EXPECT_NEAR(acc.forward_flops_per_token / deep_dense.forward_flops_per_token, r.paper_ratio,
                0.005);
    EXPECT_DOUBLE_EQ(acc.active_params, deep_dense.active_params);
    if (r.k >= 12) EXPECT_NEAR(acc.capacity_ratio, r.paper_capacity, 0.02);
  }
}

// Table 3 compares every variant at the same N_act = 936M (L = 32768, C = 1.5e20): each
// ablation of A1K16 keeps full X-MoD's active-equivalent size; all but "w/o dense prefix"
// also its total N and phi/phi_D.
TEST(AccountingTest, Table3AblationsAtMatchedSize) {
  const Accounting dense = MustAccount(Spec(DENSE, "936M"));
  const Accounting full = MustAccount(XMoD("936M", 16, 1));
  const double full_phi = full.forward_flops_per_token / dense.forward_flops_per_token;
  EXPECT_NEAR(full_phi, 0.67, 0.005);
  std::vector<xmod::v1::ModelSpec> ablations(4, XMoD("936M", 16, 1));
  ablations[0].set_no_anchors(true);
  ablations[1].set_no_gated_scaling(true);
  ablations[2].set_no_token_choice_bias(true);
  ablations[3].set_n0(0);  // w/o dense prefix
  for (const xmod::v1::ModelSpec& model : ablations) {
    const Accounting acc = MustAccount(model);
    EXPECT_DOUBLE_EQ(acc.active_params, full.active_params) << acc.plan.notation;
    EXPECT_DOUBLE_EQ(acc.active_params, dense.active_params) << acc.plan.notation;
    // Without the prefix its 4 dense layers' budget becomes 2 more groups (N0 = 0:
    // "([S16]x16+[D])x14"): same N_act, phi/phi_D 0.61; the other variants keep the plan.
    const bool no_prefix = model.has_n0();
    EXPECT_NEAR(acc.forward_flops_per_token / dense.forward_flops_per_token,
                no_prefix ? 0.61 : full_phi, no_prefix ? 0.005 : 1e-12)
        << acc.plan.notation;
  }
  // w/o anchors changes only where the dense layers sit.
  const Accounting no_anchors = MustAccount(ablations[0]);
  EXPECT_DOUBLE_EQ(no_anchors.total_params, full.total_params);
  EXPECT_EQ(no_anchors.layers, full.layers);
  EXPECT_EQ(no_anchors.dense_layers, full.dense_layers);
  EXPECT_DOUBLE_EQ(no_anchors.forward_flops_per_token, full.forward_flops_per_token);
}

// C = train_flops_multiplier x forward FLOPs/token x tokens; 3 unless a spec says otherwise.
TEST(AccountingTest, TrainFlopsMultiplier) {
  xmod::v1::TrainingSpec training;
  EXPECT_EQ(TrainFlopsMultiplier(training), 3.0);
  training.set_train_flops_multiplier(4);
  EXPECT_EQ(TrainFlopsMultiplier(training), 4.0);
  const Accounting three = MustAccount(XMoD("556M", 8, 4));
  absl::StatusOr<Accounting> four = Account(XMoD("556M", 8, 4), kL, 4);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_DOUBLE_EQ(three.train_flops_per_token, 3 * three.forward_flops_per_token);
  EXPECT_DOUBLE_EQ(four->train_flops_per_token, 4 * four->forward_flops_per_token);
  EXPECT_DOUBLE_EQ(four->forward_flops_per_token, three.forward_flops_per_token);
  for (double bad : {0.0, -3.0, std::nan("")}) {
    EXPECT_THAT(Account(XMoD("556M", 8, 4), kL, bad).status().message(),
                HasSubstr("training.train_flops_multiplier: "));
  }
}

TEST(AccountingTest, MoEDefaultsExpertDimToMatchDenseFlops) {
  for (const char* backbone : {"556M", "936M", "1.65B"}) {
    const Accounting moe = MustAccount(MoE(backbone, 6, 64, 2));
    const Accounting dense = MustAccount(Spec(DENSE, backbone));
    EXPECT_EQ(moe.experts.expert_dim * 8, dense.backbone.ffn_dim);
    EXPECT_DOUBLE_EQ(moe.forward_flops_per_token, dense.forward_flops_per_token);
    EXPECT_EQ(moe.plan.notation, "[MoE]x28");
  }
  xmod::v1::ModelSpec explicit_dim = MoE("556M", 6, 64, 2);
  explicit_dim.mutable_moe()->set_expert_dim(256);
  const Accounting acc = MustAccount(explicit_dim);
  const double attention = 2.0 * 1024 * 2048 + 2.0 * 1024 * 1024;
  const double expert = 3.0 * 1024 * 256;
  EXPECT_DOUBLE_EQ(acc.per_layer_params, attention + 66 * expert + 64 * 1024.0);
  EXPECT_DOUBLE_EQ(acc.active_params, 28 * (attention + 8 * expert));
}

TEST(AccountingTest, KOneIsTheDenseModel) {
  const Accounting dense = MustAccount(Spec(DENSE, "556M"));
  for (auto arch : {XMOD, MOD, ROUTED_FFN, SELECTED_Q_FULL_KV}) {
    const Accounting acc = MustAccount(Spec(arch, "556M", 1, 4));
    EXPECT_EQ(acc.plan.notation, "[D]x28");
    EXPECT_DOUBLE_EQ(acc.total_params, dense.total_params);
    EXPECT_DOUBLE_EQ(acc.forward_flops_per_token, dense.forward_flops_per_token);
  }
}

TEST(AccountingTest, SparseAttentionShrinksWithLOverKSquared) {
  const Accounting short_l = MustAccount(XMoD("cpu-d256", 4, 1), 1024);
  const Accounting long_l = MustAccount(XMoD("cpu-d256", 4, 1), 4096);
  // [D]x4 + ([S4]x4+[D])x2: 6 dense, 8 sparse layers; attention term 4*L*256*(6 + 8/16).
  EXPECT_EQ(short_l.plan.notation, "[D]x4 + ([S4]x4+[D])x2");
  EXPECT_DOUBLE_EQ(long_l.forward_flops_per_token - short_l.forward_flops_per_token,
                   4.0 * (4096 - 1024) * 256 * (6 + 8.0 / 16));
}

TEST(AccountingTest, RejectsBadInput) {
  absl::StatusOr<Accounting> acc = Account(XMoD("556M", 16, 3), 8);
  EXPECT_EQ(acc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(acc.status().message(), HasSubstr("k: "));
  EXPECT_TRUE(Account(XMoD("556M", 16, 3), 16).ok());  // L/K = 1 token is allowed
  EXPECT_TRUE(Account(Spec(DENSE, "556M"), 8).ok());   // Dense ignores K

  acc = Account(XMoD("556M", 8, 0.3), kL);
  EXPECT_EQ(acc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(acc.status().message(), HasSubstr("a: "));

  acc = Account(MoE("556M", 8, 6, 2), kL);
  EXPECT_EQ(acc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(acc.status().message(), HasSubstr("moe.total_experts: "));

  acc = Account(Spec(XMOD, "7B", 8, 4), kL);
  EXPECT_EQ(acc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(acc.status().message(), HasSubstr("backbone.name: "));

  xmod::v1::ModelSpec heads = XMoD("556M", 8, 4);
  heads.mutable_backbone()->set_n_kv_heads(3);
  acc = Account(heads, kL);
  EXPECT_EQ(acc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(acc.status().message(), HasSubstr("backbone.n_kv_heads: "));

  acc = Account(XMoD("556M", 8, 4), 0);
  EXPECT_THAT(acc.status().message(), HasSubstr("seq_len: "));

  xmod::v1::ModelSpec tau = XMoD("556M", 8, 4);
  tau.set_tau(-1);
  EXPECT_THAT(Account(tau, kL).status().message(), HasSubstr("tau: "));

  acc = Account(Spec(xmod::v1::ARCHITECTURE_UNSPECIFIED, "556M"), kL);
  EXPECT_THAT(acc.status().message(), HasSubstr("arch: "));

  xmod::v1::ModelSpec no_dim = MoE("556M", 5, 64, 2);  // 3072 / 7 is not whole
  EXPECT_THAT(Account(no_dim, kL).status().message(), HasSubstr("moe.expert_dim: "));
  EXPECT_THAT(Account(MoE("556M", 0, 64, 2), kL).status().message(),
              HasSubstr("moe.active_experts: "));
}

}  // namespace
}  // namespace xmod
