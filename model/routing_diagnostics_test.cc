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

}  // namespace
}  // namespace xmod
