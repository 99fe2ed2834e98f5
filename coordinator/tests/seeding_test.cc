// Seeding (coordinator/adaptive/seeding.h): a submitted spec's one expansion, the adaptive
// design's candidate space and configuration read from it, the seed set it queues, and the
// field paths of its errors.
#include "coordinator/adaptive/seeding.h"

#include <string>
#include <vector>

#include "common/field_path.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;

std::vector<xmod::v1::Run> Expand(const xmod::v1::SweepSpec& spec) {
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
  EXPECT_TRUE(runs.ok()) << runs.status();
  return runs.ok() ? *runs : std::vector<xmod::v1::Run>{};
}

TEST(AdaptiveConfigTest, ErrorsNameTheSpecField) {
  const std::string dir = NewTestDir("adaptive_config");
  xmod::v1::SweepSpec spec = AdaptiveTinySweep(dir);
  const std::vector<xmod::v1::Run> grids = Expand(spec);
  ASSERT_TRUE(AdaptiveConfigOf(spec, grids).ok()) << AdaptiveConfigOf(spec, grids).status();

  xmod::v1::SweepSpec no_targets = spec;
  no_targets.mutable_adaptive()->clear_targets();
  EXPECT_THAT(AdaptiveConfigOf(no_targets, grids).status().message(),
              HasSubstr("adaptive.targets:"));
  xmod::v1::SweepSpec bad_flops = spec;
  bad_flops.mutable_adaptive()->mutable_targets(0)->set_flops(-1);
  EXPECT_THAT(AdaptiveConfigOf(bad_flops, grids).status().message(),
              HasSubstr("adaptive.targets[0].flops"));
  xmod::v1::SweepSpec no_budget = spec;
  no_budget.mutable_adaptive()->set_compute_budget(0);
  EXPECT_THAT(AdaptiveConfigOf(no_budget, grids).status().message(),
              HasSubstr("adaptive.compute_budget"));
  xmod::v1::SweepSpec bad_backbone = spec;
  bad_backbone.mutable_adaptive()->mutable_targets(0)->set_backbone("no-such-preset");
  EXPECT_EQ(AdaptiveConfigOf(bad_backbone, grids).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AdaptiveConfigTest, SubmissionQueuesOnlyTheSeedSetWithItsDenseReferences) {
  const std::string dir = NewTestDir("adaptive_seed");
  xmod::v1::SweepSpec spec = AdaptiveTinySweep(dir);
  absl::StatusOr<ExpandedSweep> sweep = ExpandForSubmission(spec, {});
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  const std::vector<xmod::v1::Run>* all = &sweep->candidates;
  const std::vector<xmod::v1::Run>* seed = &sweep->runs;
  EXPECT_LT(seed->size(), all->size());
  EXPECT_GE(seed->size(), 5u);
  // Every sparse seed run has its dense reference in the seed set.
  for (const xmod::v1::Run& run : *seed) {
    if (run.spec().model().arch() != xmod::v1::XMOD) continue;
    bool dense = false;
    for (const xmod::v1::Run& other : *seed) {
      dense |= other.spec().model().arch() == xmod::v1::DENSE &&
               other.spec().training().seq_len() == run.spec().training().seq_len();
    }
    EXPECT_TRUE(dense) << run.name();
  }
}

TEST(SeedingTest, APlainSweepQueuesEveryRunAndHasNoDesign) {
  const std::string dir = NewTestDir("seeding_plain");
  xmod::v1::SweepSpec spec = TinySweep(dir);
  absl::StatusOr<ExpandedSweep> sweep = ExpandForSubmission(spec, {});
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->runs.size(), Expand(spec).size());
  EXPECT_TRUE(sweep->candidates.empty());
  EXPECT_FALSE(sweep->design.has_value());
}

TEST(SeedingTest, TheDesignSpaceIsTheUnionOfTheGridsRuns) {
  const std::string dir = NewTestDir("seeding_space");
  xmod::v1::SweepSpec spec = AdaptiveTinySweep(dir);
  absl::StatusOr<ExpandedSweep> sweep = ExpandForSubmission(spec, {});
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  ASSERT_TRUE(sweep->design.has_value());
  // K = 1 is the dense reference; A only for sparse runs.
  EXPECT_THAT(sweep->design->ks, ElementsAre(1, 2, 4, 8));
  EXPECT_THAT(sweep->design->as, ElementsAre(0.5, 1.0, 2.0));
  EXPECT_THAT(sweep->design->seq_lens, ElementsAre(64, 128, 256));
  EXPECT_THAT(sweep->design->backbones, ElementsAre("tiny-test"));
  EXPECT_EQ(sweep->design->bootstrap_samples, 8);
  EXPECT_EQ(sweep->candidates.size(), Expand(spec).size());
}

TEST(SeedingTest, CandidatesAreDenseAndXmodRunsOnly) {
  xmod::v1::Run dense;
  dense.mutable_spec()->mutable_model()->set_arch(xmod::v1::DENSE);
  dense.mutable_spec()->mutable_model()->mutable_backbone()->set_name("tiny-test");
  dense.mutable_spec()->mutable_training()->set_seq_len(64);
  dense.mutable_spec()->mutable_training()->set_flop_budget(1e12);
  std::optional<fitter::Candidate> c = CandidateOf(dense);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->k, 1);
  EXPECT_EQ(c->a, 1);
  EXPECT_EQ(c->seq_len, 64);
  EXPECT_TRUE(RunFor(*c, {dense}).has_value());
  xmod::v1::Run mod = dense;
  mod.mutable_spec()->mutable_model()->set_arch(xmod::v1::MOD);
  EXPECT_FALSE(CandidateOf(mod).has_value());
  EXPECT_FALSE(RunFor(*c, {mod}).has_value());
}

TEST(SeedingTest, FitterFieldsBecomeTheSpecsFields) {
  // The fitter names its fields as payloads (fitter::ValidateConfig).
  absl::Status targets = InSpec(InvalidField("targets", "at least one target is needed"));
  EXPECT_EQ(targets.message(), "adaptive.targets: at least one target is needed");
  EXPECT_EQ(FieldPathOf(targets), "adaptive.targets");
  absl::Status ks = InSpec(InvalidField("ks", "no sparse K (>= 2) to run"));
  EXPECT_EQ(ks.message(), "grids: ks: no sparse K (>= 2) to run");
  EXPECT_EQ(FieldPathOf(ks), "grids");
}

TEST(SeedingTest, AGridWithoutSparseRunsHasNoSeedSet) {
  const std::string dir = NewTestDir("seeding_dense");
  xmod::v1::SweepSpec spec = AdaptiveTinySweep(dir);
  spec.mutable_grids(0)->clear_ks();
  spec.mutable_grids(0)->add_ks(1);
  absl::StatusOr<ExpandedSweep> sweep = ExpandForSubmission(spec, {});
  EXPECT_EQ(sweep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sweep.status().message(), HasSubstr("grids: "));
}

}  // namespace
}  // namespace xmod
