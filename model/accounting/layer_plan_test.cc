// Tests of the layer plan: the paper's worked examples (B.1), fractional A, shortened first
// groups, ablations, the Routed-FFN and Selected-Q/full-KV controls, intervals and errors.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/accounting/accounting.h"
#include "model/accounting/test_specs.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;
using testing_specs::Spec;
using xmod::v1::DENSE;
using xmod::v1::MOD;
using xmod::v1::ROUTED_FFN;
using xmod::v1::SELECTED_Q_FULL_KV;
using xmod::v1::XMOD;

LayerPlan MustPlan(const xmod::v1::ModelSpec& model) {
  absl::StatusOr<Backbone> backbone = ResolveBackbone(model.backbone());
  EXPECT_TRUE(backbone.ok()) << backbone.status();
  if (!backbone.ok()) return LayerPlan{};
  absl::StatusOr<LayerPlan> plan = BuildLayerPlan(model, *backbone);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : LayerPlan{};
}

absl::Status PlanStatus(const xmod::v1::ModelSpec& model) {
  absl::StatusOr<Backbone> backbone = ResolveBackbone(model.backbone());
  if (!backbone.ok()) return backbone.status();
  return BuildLayerPlan(model, *backbone).status();
}

int Count(const LayerPlan& plan, LayerKind kind) {
  int n = 0;
  for (LayerKind k : plan.layers) n += k == kind;
  return n;
}

// Active-equivalent layers: dense 1, sparse 1/K (docs/design.md "Model").
double ActiveEquivalent(const LayerPlan& plan, int k) {
  return Count(plan, LayerKind::kDense) + static_cast<double>(Count(plan, LayerKind::kSparse)) / k;
}

TEST(LayerPlanTest, PaperExampleA4K8) {
  const LayerPlan plan = MustPlan(Spec(XMOD, "556M", 8, 4));
  EXPECT_EQ(plan.layers.size(), 161u);
  EXPECT_EQ(plan.notation, "[D]x4 + ([S8]x24+[D]) + ([S8]x32+[D])x4");
  EXPECT_EQ(plan.n0, 4);
  EXPECT_DOUBLE_EQ(ActiveEquivalent(plan, 8), 28);
  // Physical order: 4 dense, 24 sparse, 1 dense, then 4 x (32 sparse, 1 dense).
  std::vector<LayerKind> expected(4, LayerKind::kDense);
  expected.insert(expected.end(), 24, LayerKind::kSparse);
  expected.push_back(LayerKind::kDense);
  for (int g = 0; g < 4; ++g) {
    expected.insert(expected.end(), 32, LayerKind::kSparse);
    expected.push_back(LayerKind::kDense);
  }
  EXPECT_EQ(plan.layers, expected);
}

TEST(LayerPlanTest, IntervalsResetAtEveryAnchor) {
  const LayerPlan plan = MustPlan(Spec(XMOD, "556M", 8, 4));
  ASSERT_EQ(plan.interval_of_layer.size(), plan.layers.size());
  EXPECT_EQ(plan.interval_of_layer[0], -1);
  EXPECT_EQ(plan.interval_of_layer[4], 0);
  EXPECT_EQ(plan.interval_of_layer[27], 0);
  EXPECT_EQ(plan.interval_of_layer[28], -1);  // first anchor
  EXPECT_EQ(plan.interval_of_layer[29], 1);
  EXPECT_EQ(plan.interval_of_layer[159], 4);
  EXPECT_EQ(plan.interval_of_layer[160], -1);
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    EXPECT_EQ(plan.interval_of_layer[i] >= 0, plan.layers[i] == LayerKind::kSparse) << i;
  }
}

TEST(LayerPlanTest, PaperExampleA3K16) {
  const LayerPlan plan = MustPlan(Spec(XMOD, "936M", 16, 3));
  EXPECT_EQ(plan.layers.size(), 298u);
  EXPECT_EQ(plan.notation, "[D]x4 + ([S16]x48+[D])x6");
  EXPECT_DOUBLE_EQ(ActiveEquivalent(plan, 16), 28);
}

// Paper B.1: MoD is [Dense] + ([Sparse(8)] + [Dense]) x 24, whatever `a` is set to.
TEST(LayerPlanTest, ModIsOneSparseOneDense) {
  for (double a : {0.0, 4.0}) {
    const LayerPlan plan = MustPlan(Spec(MOD, "556M", 8, a));
    EXPECT_EQ(plan.layers.size(), 49u);
    EXPECT_EQ(plan.notation, "[D] + ([S8]+[D])x24");
    EXPECT_EQ(plan.n0, 1);
  }
}

// MoD with K = 4 on 28 layers: 27 / 1.25 leaves 3/4 of a group, i.e. three sparse layers
// and no room for an anchor; they join the next group's interval.
TEST(LayerPlanTest, RemainderSmallerThanAnAnchorIsAnAnchorlessFirstGroup) {
  const LayerPlan plan = MustPlan(Spec(MOD, "556M", 4));
  EXPECT_EQ(plan.notation, "[D] + [S4]x3 + ([S4]+[D])x21");
  EXPECT_DOUBLE_EQ(ActiveEquivalent(plan, 4), 28);
  EXPECT_EQ(plan.interval_of_layer[1], 0);
  EXPECT_EQ(plan.interval_of_layer[4], 0);  // same interval: no anchor in between
  EXPECT_EQ(plan.interval_of_layer[6], 1);
}

TEST(LayerPlanTest, FractionalA) {
  // A = 0.5, K = 8: groups of 4 sparse + 1 dense counting 1.5; 24 / 1.5 = 16 groups.
  const LayerPlan plan = MustPlan(Spec(XMOD, "556M", 8, 0.5));
  EXPECT_EQ(plan.notation, "[D]x4 + ([S8]x4+[D])x16");
  EXPECT_EQ(plan.layers.size(), 4u + 16 * 5);
  EXPECT_DOUBLE_EQ(ActiveEquivalent(plan, 8), 28);
  // On an 8-layer CPU backbone the 4 remaining layers leave one anchor-only first group.
  const LayerPlan cpu = MustPlan(Spec(XMOD, "cpu-d64", 4, 0.5));
  EXPECT_EQ(cpu.notation, "[D]x5 + ([S4]x2+[D])x2");
  EXPECT_DOUBLE_EQ(ActiveEquivalent(cpu, 4), 8);
}

TEST(LayerPlanTest, EveryPilotConfigurationCountsTheBackbone) {
  // Paper B.3 pilot grid: A in {0.5, 1, 2, 3, 4, 5}, K in {4, 8, 12, 16}.
  for (double a : {0.5, 1.0, 2.0, 3.0, 4.0, 5.0}) {
    for (int k : {4, 8, 12, 16}) {
      for (const char* backbone : {"165M", "cpu-d128"}) {
        const LayerPlan plan = MustPlan(Spec(XMOD, backbone, k, a));
        const int n_layers = std::string(backbone) == "165M" ? 28 : 8;
        EXPECT_DOUBLE_EQ(ActiveEquivalent(plan, k), n_layers) << plan.notation;
        // Only the first group may be shorter than A*K sparse layers.
        int run = 0;
        std::vector<int> runs;
        for (LayerKind kind : plan.layers) {
          if (kind == LayerKind::kSparse) {
            ++run;
          } else if (run > 0) {
            runs.push_back(run);
            run = 0;
          }
        }
        for (size_t i = 1; i < runs.size(); ++i) EXPECT_EQ(runs[i], a * k) << plan.notation;
      }
    }
  }
}

TEST(LayerPlanTest, DenseAndMoEPlans) {
  EXPECT_EQ(MustPlan(Spec(DENSE, "556M", 8, 4)).notation, "[D]x28");
  xmod::v1::ModelSpec moe = Spec(xmod::v1::MOE, "556M");
  const LayerPlan plan = MustPlan(moe);
  EXPECT_EQ(plan.notation, "[MoE]x28");
  EXPECT_EQ(Count(plan, LayerKind::kDense), 28);
  EXPECT_EQ(MustPlan(Spec(XMOD, "556M", 1, 4)).notation, "[D]x28");
}

TEST(LayerPlanTest, DensePrefixOverride) {
  xmod::v1::ModelSpec model = Spec(XMOD, "936M", 16, 1);
  model.set_n0(0);  // Table 3 "w/o dense prefix": 28 / 2 = 14 groups
  const LayerPlan plan = MustPlan(model);
  EXPECT_EQ(plan.notation, "([S16]x16+[D])x14");
  EXPECT_EQ(plan.n0, 0);
  EXPECT_EQ(plan.layers.front(), LayerKind::kSparse);
  model.set_n0(28);
  EXPECT_EQ(MustPlan(model).notation, "[D]x28");
}

// Table 3 "w/o dense anchors" on A1K16, at matched size: the 192 sparse layers stay, the
// 12 anchors move into the dense prefix; intervals still reset where the anchors were.
TEST(LayerPlanTest, NoAnchorsMovesAnchorsIntoThePrefix) {
  xmod::v1::ModelSpec model = Spec(XMOD, "936M", 16, 1);
  const LayerPlan full = MustPlan(model);
  EXPECT_EQ(full.notation, "[D]x4 + ([S16]x16+[D])x12");
  model.set_no_anchors(true);
  const LayerPlan plan = MustPlan(model);
  EXPECT_EQ(plan.notation, "[D]x16 + ([S16]x16)x12");
  EXPECT_EQ(plan.n0, 16);
  EXPECT_EQ(plan.layers.size(), full.layers.size());
  EXPECT_EQ(Count(plan, LayerKind::kSparse), 192);
  EXPECT_EQ(Count(plan, LayerKind::kDense), 16);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(plan.layers[i], LayerKind::kDense);
  EXPECT_EQ(plan.interval_of_layer[16], 0);
  EXPECT_EQ(plan.interval_of_layer[32], 1);
  EXPECT_EQ(plan.interval_of_layer.back(), 11);
  // A4K8: the shortened first group's anchor moves too; an anchor-only group disappears.
  xmod::v1::ModelSpec a4k8 = Spec(XMOD, "936M", 8, 4);
  a4k8.set_no_anchors(true);
  EXPECT_EQ(MustPlan(a4k8).notation, "[D]x9 + [S8]x24 + ([S8]x32)x4");
  xmod::v1::ModelSpec a1k4 = Spec(XMOD, "tiny-test", 4, 1);  // 6 layers: [D]x4 + ([S4]x4+[D])
  a1k4.set_n0(3);  // remainder of exactly one dense layer: an anchor-only first group
  EXPECT_EQ(MustPlan(a1k4).notation, "[D]x4 + ([S4]x4+[D])");
  a1k4.set_no_anchors(true);
  EXPECT_EQ(MustPlan(a1k4).notation, "[D]x5 + [S4]x4");
}

TEST(LayerPlanTest, RoutedFfnControl) {
  const LayerPlan plan = MustPlan(Spec(ROUTED_FFN, "936M", 8, 4));
  EXPECT_EQ(plan.notation, "[D]x4 + (([A]+[F8]x8)x3+[D]) + (([A]+[F8]x8)x4+[D])x4");
  EXPECT_EQ(Count(plan, LayerKind::kRoutedFfn), 152);
  EXPECT_EQ(Count(plan, LayerKind::kAttention), 19);
  EXPECT_EQ(Count(plan, LayerKind::kDense), 9);
  // Each attention module precedes K routed FFNs of the same interval.
  EXPECT_EQ(plan.layers[4], LayerKind::kAttention);
  EXPECT_EQ(plan.interval_of_layer[4], -1);
  for (int i = 5; i < 13; ++i) {
    EXPECT_EQ(plan.layers[i], LayerKind::kRoutedFfn);
    EXPECT_EQ(plan.interval_of_layer[i], 0);
  }
  EXPECT_EQ(plan.layers[13], LayerKind::kAttention);
  EXPECT_THAT(PlanStatus(Spec(ROUTED_FFN, "936M", 8, 0.5)).message(), HasSubstr("a: "));
  xmod::v1::ModelSpec no_anchors = Spec(ROUTED_FFN, "936M", 16, 3);
  no_anchors.set_no_anchors(true);
  EXPECT_EQ(MustPlan(no_anchors).notation, "[D]x10 + (([A]+[F16]x16)x3)x6");
}

TEST(LayerPlanTest, SelectedQueryFullKvSharesTheXModPlan) {
  const LayerPlan xmod = MustPlan(Spec(XMOD, "936M", 8, 4));
  const LayerPlan sq = MustPlan(Spec(SELECTED_Q_FULL_KV, "936M", 8, 4));
  ASSERT_EQ(sq.layers.size(), xmod.layers.size());
  EXPECT_EQ(sq.interval_of_layer, xmod.interval_of_layer);
  EXPECT_EQ(Count(sq, LayerKind::kSparseFullKv), 152);
  EXPECT_EQ(sq.notation, "[D]x4 + ([SQ8]x24+[D]) + ([SQ8]x32+[D])x4");
}

TEST(LayerPlanTest, RejectsBadInput) {
  absl::Status s = PlanStatus(Spec(XMOD, "556M", 8, 0.3));  // A*K = 2.4
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("a: "));
  EXPECT_THAT(PlanStatus(Spec(XMOD, "556M", 8, 0)).message(), HasSubstr("a: "));
  EXPECT_THAT(PlanStatus(Spec(XMOD, "556M", 8, -1)).message(), HasSubstr("a: "));
  EXPECT_THAT(PlanStatus(Spec(XMOD, "556M", 0, 4)).message(), HasSubstr("k: "));
  EXPECT_THAT(PlanStatus(Spec(MOD, "556M", -2)).message(), HasSubstr("k: "));
  // A hostile A*K would build billions of layers (fuzz/spec_text_fuzzer ran out of memory).
  EXPECT_THAT(PlanStatus(Spec(XMOD, "556M", 8, 1 << 10)).message(),
              HasSubstr("sparse layers per group is more than 4096"));
  EXPECT_THAT(PlanStatus(Spec(XMOD, "556M", 8, 1e300)).message(), HasSubstr("a: "));
  // MoD takes no A, so K alone bounds its groups (the fuzzer's MoD with K = 409999999).
  EXPECT_THAT(PlanStatus(Spec(MOD, "556M", 409999999)).message(),
              HasSubstr("k: K = 409999999 is more than 4096"));
  xmod::v1::ModelSpec n0 = Spec(XMOD, "556M", 8, 4);
  n0.set_n0(29);
  EXPECT_THAT(PlanStatus(n0).message(), HasSubstr("n0: "));
  n0.set_n0(-1);
  EXPECT_THAT(PlanStatus(n0).message(), HasSubstr("n0: "));
}

}  // namespace
}  // namespace xmod
