// The whole model on plans from the accounting library: causality of the threshold rule,
// exact top-k counts and the per-interval token-choice bias, every architecture's forward /
// backward, the Muon / AdamW parameter split, and a Table 9-depth (412-layer) stack training.
#include "model/transformer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>

#include "model/accounting/accounting.h"
#include "model/test_specs.h"

namespace xmod {
namespace {

Transformer Build(const xmod::v1::ModelSpec& spec, int seq_len) {
  absl::StatusOr<Accounting> acc = Account(spec, seq_len);
  EXPECT_TRUE(acc.ok()) << acc.status();
  return Transformer(spec, *acc, seq_len);
}

class CausalityTest : public ::testing::TestWithParam<xmod::v1::Architecture> {};

TEST_P(CausalityTest, ChangingTokenTPlusOneLeavesLogitsUpToTUnchanged) {
  torch::manual_seed(1);
  torch::set_num_threads(1);
  constexpr int kL = 32;
  Transformer model = Build(TinySpec(GetParam(), /*k=*/4, /*a=*/1), kL);
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, 256, {3, kL}, torch::kLong);
  RoutingTrace trace;
  torch::Tensor base = model->Logits(tokens, RoutingMode::kThreshold, &trace);
  for (int t : {0, 9, 20, kL - 2}) {
    torch::Tensor changed = tokens.clone();
    changed.select(1, t + 1).add_(1).remainder_(256);
    torch::Tensor logits = model->Logits(changed, RoutingMode::kThreshold);
    EXPECT_TRUE(torch::allclose(logits.narrow(1, 0, t + 1), base.narrow(1, 0, t + 1), 1e-5, 1e-6))
        << "t=" << t;
    EXPECT_FALSE(torch::allclose(logits.narrow(1, t + 1, 1), base.narrow(1, t + 1, 1)));
  }
  if (GetParam() != xmod::v1::DENSE) {
    // The threshold rule selected some tokens, not all, somewhere: the test is not vacuous.
    ASSERT_FALSE(trace.selected.empty());
    const double share = torch::stack(trace.selected).to(torch::kDouble).mean().item<double>();
    EXPECT_GT(share, 0.05);
    EXPECT_LT(share, 0.95);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, CausalityTest,
                         ::testing::Values(xmod::v1::DENSE, xmod::v1::XMOD, xmod::v1::MOD,
                                           xmod::v1::SELECTED_Q_FULL_KV, xmod::v1::ROUTED_FFN));

TEST(Transformer, TopKSelectsExactlyKAndBiasCountsPerInterval) {
  torch::manual_seed(2);
  constexpr int kL = 32, kK = 4;
  xmod::v1::ModelSpec spec = TinySpec(xmod::v1::XMOD, kK, /*a=*/1);
  spec.mutable_backbone()->set_n_layers(8);  // [D]x4 + ([S4]x4+[D])x2
  Transformer model = Build(spec, kL);
  torch::Tensor tokens = torch::randint(0, 256, {2, kL}, torch::kLong);
  RoutingTrace trace;
  model->forward(tokens, tokens, RoutingMode::kTopK, &trace);
  ASSERT_EQ(trace.selected.size(), 8u);
  std::set<int> intervals(trace.interval.begin(), trace.interval.end());
  EXPECT_EQ(intervals.size(), 2u);
  for (size_t l = 0; l < trace.selected.size(); ++l) {
    EXPECT_TRUE(torch::equal(trace.selected[l].sum(1), torch::full({2}, int64_t{kL / kK})));
    EXPECT_TRUE(torch::equal(trace.selected[l], trace.topk_mask[l]));
    // b = selections of the earlier layers of the same interval, zero at its first layer.
    torch::Tensor expected = torch::zeros({2, kL});
    for (size_t j = 0; j < l; ++j) {
      if (trace.interval[j] == trace.interval[l]) expected += trace.selected[j].to(torch::kFloat);
    }
    EXPECT_TRUE(torch::equal(trace.bias[l], expected)) << "layer " << l;
  }
  // The bias makes a token already chosen less likely to be chosen again: coverage of an
  // interval of 4 layers x 8 of 32 tokens is well above one layer's 25%.
  RoutingDiagnostics diag = ComputeRoutingDiagnostics(trace);
  EXPECT_GT(diag.coverage, 0.6);
}

// θ reaches the attention: the same weights under the backbone's θ and under 1e6 (Qwen3's,
// paper B.1) give different logits.
TEST(Transformer, RopeThetaComesFromTheBackbone) {
  xmod::v1::ModelSpec spec = TinySpec(xmod::v1::DENSE);
  torch::manual_seed(5);
  Transformer preset = Build(spec, 16);
  EXPECT_EQ(preset->rope_theta(), 1e4);
  spec.mutable_backbone()->set_rope_theta(1e6);
  torch::manual_seed(5);
  Transformer qwen3 = Build(spec, 16);
  EXPECT_EQ(qwen3->rope_theta(), 1e6);
  torch::Tensor tokens = torch::randint(0, 256, {1, 16}, torch::kLong);
  torch::NoGradGuard no_grad;
  const torch::Tensor a = preset->Logits(tokens, RoutingMode::kTopK);
  const torch::Tensor b = qwen3->Logits(tokens, RoutingMode::kTopK);
  // Position 0 is not rotated at any θ; later positions are.
  EXPECT_TRUE(torch::allclose(a.select(1, 0), b.select(1, 0)));
  EXPECT_FALSE(torch::allclose(a, b));
}

TEST(Transformer, EveryArchitectureTrainsOneStepAndSplitsParameters) {
  for (auto arch : {xmod::v1::DENSE, xmod::v1::MOD, xmod::v1::XMOD, xmod::v1::MOE,
                    xmod::v1::ROUTED_FFN, xmod::v1::SELECTED_Q_FULL_KV}) {
    SCOPED_TRACE(xmod::v1::Architecture_Name(arch));
    torch::manual_seed(3);
    Transformer model = Build(TinySpec(arch, 4, 1), 16);
    torch::Tensor tokens = torch::randint(0, 256, {2, 16}, torch::kLong);
    ModelOutput out = model->forward(tokens, tokens, RoutingMode::kTopK);
    EXPECT_TRUE(std::isfinite(out.loss.item<double>()));
    EXPECT_NEAR(out.loss.item<double>(), std::log(256.0), 0.5);  // near-uniform at init
    (out.loss + out.aux_loss).backward();
    const bool routed = arch != xmod::v1::DENSE && arch != xmod::v1::MOE;
    EXPECT_EQ(out.aux_loss.item<double>() > 0, routed || arch == xmod::v1::MOE);
    // Muon and AdamW groups are disjoint and complete; Muon holds only matrices.
    std::set<const void*> muon, adamw;
    for (auto& p : model->MuonParameters()) {
      EXPECT_EQ(p.dim(), 2);
      muon.insert(p.data_ptr());
    }
    for (auto& p : model->AdamWParameters()) adamw.insert(p.data_ptr());
    for (const void* p : muon) EXPECT_EQ(adamw.count(p), 0u);
    EXPECT_EQ(muon.size() + adamw.size(), model->parameters().size());
    for (auto& p : model->parameters()) {
      ASSERT_TRUE(p.grad().defined());
      EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
    }
    model->AfterOptimizerStep();
  }
}

TEST(Transformer, Table9DepthStackOf412LayersTrains) {
  // Deep X-MoD A1K16 of Table 9 (52 active-equivalent layers, N0 = 4) at tiny width.
  torch::manual_seed(4);
  torch::set_num_threads(1);
  constexpr int kL = 64;
  xmod::v1::ModelSpec spec = TinySpec(xmod::v1::XMOD, /*k=*/16, /*a=*/1);
  spec.mutable_backbone()->set_n_layers(52);
  absl::StatusOr<Accounting> acc = Account(spec, kL);
  ASSERT_TRUE(acc.ok()) << acc.status();
  ASSERT_EQ(acc->plan.layers.size(), 412u);
  Transformer model(spec, *acc, kL);
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(3e-3));
  torch::Tensor tokens = torch::randint(0, 256, {2, kL + 1}, torch::kLong);
  torch::Tensor input = tokens.narrow(1, 0, kL), target = tokens.narrow(1, 1, kL);
  std::vector<double> losses;
  for (int step = 0; step < 4; ++step) {
    opt.zero_grad();
    ModelOutput out = model->forward(input, target, RoutingMode::kTopK);
    (out.loss + out.aux_loss).backward();
    opt.step();
    model->AfterOptimizerStep();
    losses.push_back(out.loss.item<double>());
    ASSERT_TRUE(std::isfinite(losses.back()));
  }
  EXPECT_LT(losses.back(), losses.front());  // the same batch is being fitted
}

}  // namespace
}  // namespace xmod
