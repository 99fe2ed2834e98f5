// The stopping claim's pieces (design_evidence.h): the regret bound is a quantile of the
// members' regret, and an answer is held back when the design's own runs at a target
// disagree with the law or with the recommendation by more than their noise.
#include "fitter/design_evidence.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod::fitter {
namespace {

using testing::HasSubstr;

TEST(DesignEvidenceTest, RegretBoundIsTheMembersQuantile) {
  // Ten members, option 0 chosen; member m's regret there is m / 1000.
  std::vector<std::vector<double>> deltas;
  for (int m = 0; m < 10; ++m) deltas.push_back({m / 1000.0, 0.0});
  EXPECT_DOUBLE_EQ(RegretQuantile(deltas, 0, 0.9), 0.008);  // 9 of 10 at or below
  EXPECT_DOUBLE_EQ(RegretQuantile(deltas, 0, 0.5), 0.004);
  EXPECT_DOUBLE_EQ(RegretQuantile(deltas, 0, 0.99), 0.009);
  EXPECT_DOUBLE_EQ(RegretQuantile(deltas, 1, 0.9), 0.0);
}

constexpr double kFlops = 5e19;

Observation RunAt(int k, double a, double delta, int replicates = 1) {
  absl::StatusOr<Observation> o = MakeDeltaObservation("run", "556M", 4096, k, a, delta);
  EXPECT_TRUE(o.ok()) << o.status();
  o->flops = kFlops;
  o->replicates = replicates;
  return *o;
}

double LawDelta(int k, double a) { return PredictDelta(Table8Params(), RunAt(k, a, 0).point()); }

TargetAnswer Recommends(int k, double a) {
  TargetAnswer answer;
  answer.target = {kFlops, 4096, "556M"};
  answer.k = k;
  answer.a = a;
  answer.delta = LawDelta(k, a);
  return answer;
}

TEST(DesignEvidenceTest, RunsWithinTheirNoiseDoNotHoldTheAnswerBack) {
  const std::vector<LawParams> members(4, Table8Params());
  const std::vector<Observation> runs = {RunAt(8, 1, LawDelta(8, 1) + 0.002),
                                         RunAt(16, 1, LawDelta(16, 1) - 0.002)};
  EXPECT_EQ(DisagreementWithRuns(runs, {Recommends(8, 1)}, members, 0.003, 3), std::nullopt);
  // A run elsewhere (another L) is not the target's evidence.
  Observation elsewhere = RunAt(8, 1, LawDelta(8, 1) + 0.5);
  elsewhere.seq_len = 2048;
  EXPECT_EQ(DisagreementWithRuns({elsewhere}, {Recommends(8, 1)}, members, 0.003, 3), std::nullopt);
}

TEST(DesignEvidenceTest, ALawFarFromItsOwnRunsIsHeldBack) {
  const std::vector<LawParams> members(4, Table8Params());
  // Four seeds at K = 16 measured 0.02 above what the law says: 13 standard errors.
  const std::vector<Observation> runs = {RunAt(16, 1, LawDelta(16, 1) + 0.02, 4)};
  std::optional<std::string> why =
      DisagreementWithRuns(runs, {Recommends(8, 1)}, members, 0.003, 3);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("K=16"));
  EXPECT_THAT(*why, HasSubstr("measured"));
}

TEST(DesignEvidenceTest, AMeasuredOptionBeatingTheAnswerHoldsItBack) {
  // The runs at the target agree with the law, and they say the recommended option is the
  // worse of the two measured by far more than their noise.
  const std::vector<LawParams> members(4, Table8Params());
  const double d2 = LawDelta(2, 1), d16 = LawDelta(16, 1);
  ASSERT_GT(std::abs(d2 - d16), 0.004);  // 4 standard errors at noise 0.001
  const int better = d2 < d16 ? 2 : 16, worse = d2 < d16 ? 16 : 2;
  const std::vector<Observation> runs = {RunAt(2, 1, d2, 2), RunAt(16, 1, d16, 2)};
  std::optional<std::string> why =
      DisagreementWithRuns(runs, {Recommends(worse, 1)}, members, 0.001, 3);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("better than the recommended K=" + std::to_string(worse)));
  EXPECT_THAT(*why, HasSubstr("K=" + std::to_string(better)));
  EXPECT_EQ(DisagreementWithRuns(runs, {Recommends(better, 1)}, members, 0.001, 3), std::nullopt);
}

}  // namespace
}  // namespace xmod::fitter
