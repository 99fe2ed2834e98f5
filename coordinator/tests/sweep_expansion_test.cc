// Sweep expansion tests: product counts, K = 1 -> dense, deduplication, names, budgets, and
// every bad-input case naming its field.
#include "coordinator/spec/sweep_expansion.h"

#include <set>

#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/accounting/accounting.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(SweepExpansionTest, CartesianProductWithDenseReferenceDeduplicated) {
  const std::string dir = NewTestDir("expand");
  xmod::v1::SweepSpec spec = TinySweep(dir);
  // DENSE x K{1,2,4} collapses to one run; XMOD K=1 is that same dense run.
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].spec().model().arch(), xmod::v1::DENSE);
  EXPECT_EQ((*runs)[0].name(), "dense-tiny-test-L64");
  EXPECT_EQ((*runs)[1].name(), "xmod-tiny-test-L64-K2-A1");
  EXPECT_EQ((*runs)[2].name(), "xmod-tiny-test-L64-K4-A1");
  for (const xmod::v1::Run& run : *runs) {
    EXPECT_EQ(run.state(), xmod::v1::QUEUED);
    EXPECT_EQ(run.max_attempts(), kDefaultMaxAttempts);
    EXPECT_EQ(run.label(), "kx");
    EXPECT_EQ(run.spec().training().seq_len(), 64);
    EXPECT_DOUBLE_EQ(run.spec().training().flop_budget(), 1e12);
    absl::StatusOr<Accounting> acc = Account(run.spec().model(), 64);
    ASSERT_TRUE(acc.ok());
    EXPECT_DOUBLE_EQ(run.forward_flops_per_token(), acc->forward_flops_per_token);
    EXPECT_DOUBLE_EQ(run.total_params(), acc->total_params);
  }
  // Sparse runs cost fewer FLOPs per token than the dense reference.
  EXPECT_LT((*runs)[2].forward_flops_per_token(), (*runs)[0].forward_flops_per_token());
}

TEST(SweepExpansionTest, SeedsReplicateEveryRunWithItsSeed) {
  const std::string dir = NewTestDir("seeds");
  xmod::v1::SweepSpec spec = TinySweep(dir);
  spec.mutable_grids(0)->add_seeds(1);
  spec.mutable_grids(0)->add_seeds(2);
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 6u);  // the three runs of the grid, each with seeds 1 and 2
  EXPECT_EQ((*runs)[0].name(), "dense-tiny-test-L64-s1");
  EXPECT_EQ((*runs)[1].name(), "dense-tiny-test-L64-s2");
  EXPECT_EQ((*runs)[5].name(), "xmod-tiny-test-L64-K4-A1-s2");
  EXPECT_EQ((*runs)[0].spec().training().seed(), 1u);
  EXPECT_EQ((*runs)[5].spec().training().seed(), 2u);
}

TEST(SweepExpansionTest, RunSharedByTwoGridsCarriesBothLabels) {
  const std::string dir = NewTestDir("shared");
  xmod::v1::SweepSpec spec = TinySweep(dir);
  spec.mutable_grids(0)->set_label("nact");
  *spec.add_grids() = spec.grids(0);
  spec.mutable_grids(1)->set_label("axk");
  spec.mutable_grids(1)->add_as(2);
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 5u);  // dense, K2 and K4 at A = 1 shared; K2 and K4 at A = 2
  EXPECT_EQ((*runs)[1].name(), "xmod-tiny-test-L64-K2-A1");
  EXPECT_EQ((*runs)[1].label(), "nact+axk");
  EXPECT_EQ((*runs)[3].name(), "xmod-tiny-test-L64-K2-A2");
  EXPECT_EQ((*runs)[3].label(), "axk");
}

TEST(SweepExpansionTest, CountsMultiplyAcrossAxesAndGrids) {
  const std::string dir = NewTestDir("count");
  xmod::v1::SweepSpec spec = TinySweep(dir);
  xmod::v1::GridSpec* grid = spec.mutable_grids(0);
  grid->clear_archs();
  grid->add_archs(xmod::v1::XMOD);
  grid->clear_ks();
  grid->add_ks(2);
  grid->add_ks(4);
  grid->clear_as();
  grid->add_as(0.5);
  grid->add_as(1);
  grid->add_as(2);
  grid->add_seq_lens(64);
  grid->add_seq_lens(128);
  grid->add_flop_budgets(1e12);
  grid->add_flop_budgets(2e12);
  // 2 K x 3 A x 2 L x 2 budgets = 24, plus a second grid repeating 4 of them -> still 24.
  xmod::v1::GridSpec* again = spec.add_grids();
  *again = *grid;
  again->clear_as();
  again->add_as(1);
  again->clear_seq_lens();
  again->add_seq_lens(64);
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ(runs->size(), 24u);
  std::set<std::string> names;
  for (const auto& r : *runs) names.insert(r.name());
  EXPECT_EQ(names.size(), 24u);
  EXPECT_TRUE(names.count("xmod-tiny-test-L128-K4-A0.5-C2e12")) << *names.begin();
}

TEST(SweepExpansionTest, HeldOutFromFitPlan) {
  const std::string dir = NewTestDir("held");
  xmod::v1::SweepSpec spec = TinySweep(dir);
  spec.mutable_grids(0)->add_seq_lens(64);
  spec.mutable_grids(0)->add_seq_lens(128);
  spec.mutable_fit()->add_held_out_seq_lens(128);
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 6u);
  for (const auto& r : *runs) {
    EXPECT_EQ(r.held_out(), r.spec().training().seq_len() == 128) << r.name();
  }
}

struct BadCase {
  std::string name;
  std::function<void(xmod::v1::SweepSpec*)> mutate;
  std::string expected_prefix;
};

TEST(SweepExpansionTest, BadInputNamesTheField) {
  const std::string dir = NewTestDir("bad");
  const std::vector<BadCase> cases = {
      {"k<1", [](auto* s) { s->mutable_grids(0)->set_ks(2, 0); }, "grids[0].ks[2]: K must be >= 1"},
      {"a<=0", [](auto* s) { s->mutable_grids(0)->set_as(0, 0); }, "grids[0].as[0]: A must be > 0"},
      {"backbone",
       [](auto* s) {
         *s->add_grids() = s->grids(0);
         s->mutable_grids(1)->set_backbones(0, "9B");
       },
       "grids[1].backbones[0]: unknown backbone \"9B\""},
      {"train glob", [&](auto* s) { s->mutable_data()->set_train_glob(dir + "/nothing_*.bin"); },
       "data.train_glob: no file under a data root matches"},
      {"glob outside the roots", [](auto* s) { s->mutable_data()->set_train_glob("/etc/*"); },
       "data.train_glob: \"/etc/*\" is not an absolute path under a data root"},
      {"val glob", [](auto* s) { s->mutable_data()->clear_val_glob(); }, "data.val_glob:"},
      {"budget", [](auto* s) { s->mutable_training()->set_flop_budget(1e3); },
       "training.flop_budget: 1e3 is too small for one step (one step costs "},
      {"grid budget", [](auto* s) { s->mutable_grids(0)->add_flop_budgets(-1); },
       "grids[0].flop_budgets[0]:"},
      {"L", [](auto* s) { s->mutable_grids(0)->add_seq_lens(0); }, "grids[0].seq_lens[0]:"},
      {"A*K", [](auto* s) { s->mutable_grids(0)->set_as(0, 0.3); }, "grids[0].as[0]: A*K"},
      {"batch", [](auto* s) { s->mutable_training()->set_batch_tokens(100); },
       "training.batch_tokens: 100 tokens per step is not a multiple of L = 64"},
      {"seed twice",
       [](auto* s) {
         s->mutable_grids(0)->add_seeds(3);
         s->mutable_grids(0)->add_seeds(3);
       },
       "grids[0].seeds[1]: seed 3 is listed twice"},
      {"ranks<0", [](auto* s) { s->mutable_training()->set_ranks(-1); },
       "training.ranks: must be >= 0"},
      {"ranks split", [](auto* s) { s->mutable_training()->set_ranks(3); },
       "training.ranks: 3 ranks do not divide the 2 windows of a step (batch_tokens / L = "
       "128 / 64, training.seq_len)"},
      {"arch",
       [](auto* s) { s->mutable_grids(0)->set_archs(0, xmod::v1::ARCHITECTURE_UNSPECIFIED); },
       "grids[0].archs[0]:"},
      {"name", [](auto* s) { s->clear_name(); }, "name:"},
      {"moe", [](auto* s) { s->mutable_grids(0)->add_moe_experts("6x64"); },
       "grids[0].moe_experts[0]:"},
      // Size limits (SpecLimits defaults), checked before anything is expanded.
      {"grid size",
       [](auto* s) {
         for (int i = 0; i < 1001; ++i) s->mutable_grids(0)->add_seq_lens(64);
       },
       "grids[0].seq_lens: 1001 values, at most 1000"},
      {"grids",
       [](auto* s) {
         for (int i = 0; i < 1000; ++i) *s->add_grids() = s->grids(0);
       },
       "grids: 1001 values, at most 1000"},
      {"runs",
       [](auto* s) {
         for (int i = 0; i < 400; ++i) s->mutable_grids(0)->add_ks(i + 2);
         for (int i = 0; i < 20; ++i) s->mutable_grids(0)->add_as(1 + i);
       },
       "grids[0]: the grids expand to more than 10000 runs, the most one sweep may have"},
      {"runs across grids",
       [](auto* s) {
         for (int i = 0; i < 400; ++i) s->mutable_grids(0)->add_ks(i + 2);
         for (int i = 0; i < 5; ++i) s->mutable_grids(0)->add_as(1 + i);
         for (int g = 0; g < 5; ++g) *s->add_grids() = s->grids(0);
       },
       "grids[2]: the grids expand to more than 10000 runs"},
      {"string", [](auto* s) { s->set_description(std::string(5000, 'd')); },
       "description: 5000 bytes, at most 4096"},
      {"nested string",
       [](auto* s) { s->mutable_grids(0)->set_backbones(0, std::string(4097, 'b')); },
       "grids[0].backbones[0]: 4097 bytes, at most 4096"},
      {"deep string",
       [](auto* s) {
         s->mutable_grids(0)->mutable_base()->mutable_backbone()->set_name(std::string(9000, 'x'));
       },
       "grids[0].base.backbone.name: 9000 bytes, at most 4096"},
      {"bootstrap", [](auto* s) { s->mutable_fit()->set_bootstrap_samples(2000000000); },
       "fit.bootstrap_samples: 2000000000 refits, at most 10000"},
      {"bootstrap<0", [](auto* s) { s->mutable_fit()->set_bootstrap_samples(-1); },
       "fit.bootstrap_samples: must be >= 0"},
      {"ensemble", [](auto* s) { s->mutable_adaptive()->set_bootstrap_samples(20000); },
       "adaptive.bootstrap_samples: 20000 exceeds the limit 1000"},
      {"in flight", [](auto* s) { s->mutable_adaptive()->set_max_in_flight(5000); },
       "adaptive.max_in_flight: 5000 exceeds the limit 100"},
      {"layers",
       [](auto* s) {
         s->mutable_grids(0)->mutable_base()->mutable_backbone()->set_n_layers(2000000000);
       },
       "grids[0].base.backbone.n_layers: 2000000000 exceeds the limit 4096"},
      {"eval task",
       [](auto* s) {
         s->mutable_training()->add_eval_tasks()->set_task("boolq");
         s->mutable_training()->mutable_eval_tasks(0)->set_data("/data/boolq.jsonl");
         s->mutable_training()->add_eval_tasks()->set_task("mmlu");
       },
       "training.eval_tasks[1].task: unknown task \"mmlu\""},
      {"eval data", [](auto* s) { s->mutable_training()->add_eval_tasks()->set_task("gcide"); },
       "training.eval_tasks[0].data: required"},
  };
  for (const BadCase& c : cases) {
    xmod::v1::SweepSpec spec = TinySweep(dir);
    c.mutate(&spec);
    ExpansionOptions options;
    options.data_roots = {dir};
    absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec, options);
    ASSERT_FALSE(runs.ok()) << c.name;
    EXPECT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(runs.status().message()), StartsWith(c.expected_prefix)) << c.name;
  }
}

TEST(SweepExpansionTest, CarriesRanksIntoEveryRun) {
  const std::string dir = NewTestDir("ranks");
  xmod::v1::SweepSpec spec = TinySweep(dir);
  spec.mutable_training()->set_ranks(2);  // 128 tokens / L 64 = 2 windows: one per rank
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_FALSE(runs->empty());
  for (const xmod::v1::Run& run : *runs) EXPECT_EQ(run.spec().training().ranks(), 2);
}

TEST(SweepExpansionTest, FormatsFlops) {
  EXPECT_EQ(FormatFlops(1e3), "1e3");
  EXPECT_EQ(FormatFlops(2.1e9), "2.1e9");
  EXPECT_EQ(FormatFlops(512), "512");
  EXPECT_EQ(FormatFlops(1.5e-7), "1.5e-7");
}

}  // namespace
}  // namespace xmod
