// Routing diagnostics (B.7) on hand-made traces with known answers.
#include "model/routing_diagnostics.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace xmod {
namespace {

torch::Tensor Mask(std::vector<int64_t> bits) {
  return torch::tensor(bits).to(torch::kBool).view({1, -1});
}

TEST(RoutingDiagnostics, CoverageJaccardUpdatesAndAgreement) {
  RoutingTrace trace;
  // Interval 0: two layers over 4 tokens. Interval 1: one layer (incomplete, excluded).
  trace.selected = {Mask({1, 1, 0, 0}), Mask({0, 1, 1, 0}), Mask({1, 1, 1, 1})};
  trace.interval = {0, 0, 1};
  trace.topk_mask = {Mask({1, 1, 0, 0}), Mask({0, 1, 1, 0}), Mask({1, 1, 0, 0})};
  trace.threshold_mask = {Mask({1, 1, 0, 0}), Mask({0, 1, 0, 0}), Mask({1, 0, 0, 1})};
  RoutingDiagnostics d = ComputeRoutingDiagnostics(trace);
  EXPECT_DOUBLE_EQ(d.coverage, 0.75);      // tokens 0, 1, 2 of 4
  EXPECT_DOUBLE_EQ(d.jaccard, 1.0 / 3.0);  // {1} / {0, 1, 2}
  ASSERT_EQ(d.updates.size(), 3u);         // counts 1, 2, 1, 0
  EXPECT_DOUBLE_EQ(d.updates[0], 0.25);
  EXPECT_DOUBLE_EQ(d.updates[1], 0.5);
  EXPECT_DOUBLE_EQ(d.updates[2], 0.25);
  EXPECT_DOUBLE_EQ(d.agreement, 9.0 / 12.0);  // 3 mismatches of 12 decisions
  EXPECT_EQ(d.observations, 1);
}

TEST(RoutingDiagnostics, AccumulatorAveragesObservationsAndSkipsUndefinedJaccard) {
  RoutingDiagnosticsAccumulator acc;
  RoutingTrace a;
  a.selected = {Mask({1, 0}), Mask({1, 0})};  // identical subsets: Jaccard 1, coverage 0.5
  a.interval = {0, 0};
  RoutingTrace b;
  b.selected = {Mask({0, 0}), Mask({0, 0})};  // nothing selected: coverage 0, Jaccard undefined
  b.interval = {0, 0};
  acc.Add(a);
  acc.Add(b);
  RoutingDiagnostics d = acc.Result();
  EXPECT_DOUBLE_EQ(d.coverage, 0.25);
  EXPECT_DOUBLE_EQ(d.jaccard, 1.0);
  EXPECT_DOUBLE_EQ(d.updates[0], 0.75);
  EXPECT_DOUBLE_EQ(d.updates[2], 0.25);
  EXPECT_EQ(d.observations, 2);
}

TEST(RoutingDiagnostics, TopKPassAgreementAndAgreementBetweenPasses) {
  RoutingTrace threshold_pass;
  threshold_pass.selected = {Mask({1, 1, 0, 0}), Mask({0, 1, 1, 0})};
  threshold_pass.interval = {0, 0};
  RoutingTrace topk_pass;
  topk_pass.selected = {Mask({1, 1, 0, 0}), Mask({1, 0, 1, 0})};  // 2 of 8 differ
  topk_pass.topk_mask = topk_pass.selected;
  topk_pass.threshold_mask = {Mask({1, 1, 1, 0}), Mask({1, 0, 1, 0})};  // 1 of 8 differs
  topk_pass.interval = {0, 0};
  RoutingDiagnosticsAccumulator acc;
  acc.AddTopKPass(topk_pass, threshold_pass);
  RoutingDiagnostics d = acc.Result();
  EXPECT_DOUBLE_EQ(d.agreement_topk_pass, 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(d.agreement_passes, 6.0 / 8.0);
}

// Table 10's reference columns: p = 1/K over A1K16's 16-layer, A4K8's 32-layer and A3K16's
// 48-layer intervals.
TEST(RoutingDiagnostics, ReferenceSchemesMatchTable10) {
  EXPECT_NEAR(RandomSubsetsReference(16, 16).coverage, 0.6439, 5e-5);
  EXPECT_NEAR(RandomSubsetsReference(16, 16).jaccard, 0.03226, 5e-6);
  EXPECT_NEAR(RandomSubsetsReference(8, 32).coverage, 0.9861, 5e-5);
  EXPECT_NEAR(RandomSubsetsReference(8, 32).jaccard, 0.06667, 5e-6);
  EXPECT_NEAR(RandomSubsetsReference(16, 48).coverage, 0.9549, 5e-5);
  EXPECT_DOUBLE_EQ(IdenticalSubsetReference(8, 32).coverage, 0.125);
  EXPECT_DOUBLE_EQ(IdenticalSubsetReference(8, 32).jaccard, 1.0);
  for (const ReferenceScheme& r : {RandomSubsetsReference(8, 5), IdenticalSubsetReference(8, 5)}) {
    double total = 0;
    for (double u : r.updates) total += u;
    EXPECT_NEAR(total, 1.0, 1e-12);
  }
}

// A trace of `n` routed layers in one interval over (B, T) where each layer selects exactly
// T/K tokens per sequence: the same subset in every layer (identical) or a fresh uniform one.
RoutingTrace SampledTrace(bool identical, int k, int n, int64_t batch, int64_t t, uint64_t seed) {
  torch::manual_seed(seed);
  RoutingTrace trace;
  torch::Tensor mask;  // (B, T) bool
  for (int l = 0; l < n; ++l) {
    if (l == 0 || !identical) {
      torch::Tensor keys = torch::rand({batch, t});                             // (B, T)
      torch::Tensor chosen = std::get<1>(keys.topk(t / k, /*dim=*/1));          // (B, T/K)
      mask = torch::zeros({batch, t}, torch::kBool).scatter_(1, chosen, true);  // (B, T)
    }
    trace.selected.push_back(mask);
    trace.interval.push_back(0);
  }
  return trace;
}

// The analytical references equal the diagnostics of sampled masks run through the same
// accumulator as the model's traces.
TEST(RoutingDiagnostics, SampledReferenceSchemesAgreeWithTheAnalyticalOnes) {
  constexpr int kK = 8, kN = 6;
  for (bool identical : {true, false}) {
    SCOPED_TRACE(identical ? "identical" : "random");
    RoutingDiagnostics d =
        ComputeRoutingDiagnostics(SampledTrace(identical, kK, kN, /*batch=*/32, /*t=*/2048, 7));
    const ReferenceScheme r =
        identical ? IdenticalSubsetReference(kK, kN) : RandomSubsetsReference(kK, kN);
    EXPECT_EQ(d.interval_length, kN);
    EXPECT_NEAR(d.coverage, r.coverage, 3e-3);
    EXPECT_NEAR(d.jaccard, r.jaccard, 3e-3);
    ASSERT_EQ(d.updates.size(), r.updates.size());
    for (size_t m = 0; m < r.updates.size(); ++m) EXPECT_NEAR(d.updates[m], r.updates[m], 3e-3);
  }
}

}  // namespace
}  // namespace xmod
