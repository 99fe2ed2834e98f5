// The bundled sweep specs (examples/): each parses as protobuf text format and expands,
// through the coordinator's own validation, into the run count its comment describes.
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "coordinator/adaptive/seeding.h"
#include "coordinator/fitting/study_sharing.h"
#include "coordinator/spec/sweep_expansion.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {
namespace {

struct Expected {
  int runs;
  int held_out;
};

TEST(ExamplesTest, EveryBundledSpecExpands) {
  const char* source = std::getenv("XMOD_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "run through ctest (XMOD_SOURCE_DIR)";
  const std::map<std::string, Expected> expected = {
      {"examples/demo.textpb", {6, 0}},
      {"examples/tiny.textpb", {4, 0}},
      {"examples/cpu_b4.textpb", {68, 0}},
      {"examples/cpu_b3_pilot.textpb", {17, 0}},
      {"examples/paper/b3_pilot.textpb", {37, 0}},
      {"examples/paper/b4_kxl.textpb", {67, 6}},
      {"examples/paper/b4_nact.textpb", {53, 5}},
      {"examples/paper/b4_axk.textpb", {25, 0}},
      {"examples/paper/table1_main.textpb", {18, 0}},
      {"examples/paper/table2_controls.textpb", {8, 0}},
      {"examples/paper/table3_ablations.textpb", {6, 0}},
      {"examples/paper/table9_deep.textpb", {5, 0}},
      {"examples/adaptive_cpu.textpb", {156, 0}},  // the candidate space
      {"examples/gpu/demo_gpu.textpb", {3, 0}},
      {"examples/gpu/b4_165m.textpb", {18, 0}},
  };
  for (const auto& [path, want] : expected) {
    SCOPED_TRACE(path);
    absl::StatusOr<std::string> text = ReadFile(std::string(source) + "/" + path);
    ASSERT_TRUE(text.ok()) << text.status();
    xmod::v1::SweepSpec spec;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, &spec));
    absl::StatusOr<std::vector<xmod::v1::Run>> runs =
        ExpandSweep(spec, ExpansionOptions{.check_data_paths = false});
    ASSERT_TRUE(runs.ok()) << runs.status();
    EXPECT_EQ(static_cast<int>(runs->size()), want.runs);
    int held_out = 0;
    for (const xmod::v1::Run& run : *runs) held_out += run.held_out();
    EXPECT_EQ(held_out, want.held_out);
  }
}

// The B.4 study names the three B.4 sweeps by name, each in its role. Their in-range X-MoD
// observations (sparse runs not held out) are 56 + 44 + 24 = 124 listed runs, of which 15 are
// configurations two sweeps share; a shared configuration has one budget and seed in both
// sweeps, so it is one run identity and the study counts the paper's 109 (docs/paper-fidelity.md,
// "B.4 as a study"; fitter/shared_runs.h merges them in the fit), and trains it once.
TEST(ExamplesTest, TheB4StudyCountsThePapers109Observations) {
  const char* source = std::getenv("XMOD_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "run through ctest (XMOD_SOURCE_DIR)";
  absl::StatusOr<std::string> text =
      ReadFile(std::string(source) + "/examples/paper/b4_study.textpb");
  ASSERT_TRUE(text.ok()) << text.status();
  xmod::v1::StudySpec study;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, &study));
  ASSERT_EQ(study.members_size(), 3);
  const std::map<std::string, int> in_range = {{"kxl", 56}, {"nact", 44}, {"axk", 24}};
  std::map<std::string, std::set<std::string>> roles_of_run;  // run identity -> member roles
  std::map<std::string, std::set<double>> budgets;            // configuration -> its budgets
  std::set<std::string> trained;  // RunIdentity of every run, dense references included
  int listed = 0;                 // runs the three sweeps list
  int total = 0;
  for (const xmod::v1::StudyMember& member : study.members()) {
    SCOPED_TRACE(member.role());
    ASSERT_TRUE(in_range.count(member.role()));
    text = ReadFile(absl::StrCat(source, "/examples/paper/b4_", member.role(), ".textpb"));
    ASSERT_TRUE(text.ok()) << text.status();
    xmod::v1::SweepSpec spec;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, &spec));
    EXPECT_EQ(member.sweep_name(), spec.name());
    absl::StatusOr<std::vector<xmod::v1::Run>> runs =
        ExpandSweep(spec, ExpansionOptions{.check_data_paths = false});
    ASSERT_TRUE(runs.ok()) << runs.status();
    int n = 0;
    for (const xmod::v1::Run& run : *runs) {
      trained.insert(RunIdentity(run.spec()));
      ++listed;
      const xmod::v1::ModelSpec& model = run.spec().model();
      const xmod::v1::TrainingSpec& training = run.spec().training();
      if (model.arch() != xmod::v1::XMOD || model.k() < 2 || run.held_out()) continue;
      ++n;
      const std::string configuration = absl::StrCat(
          model.backbone().name(), " L=", training.seq_len(), " K=", model.k(), " A=", model.a());
      budgets[configuration].insert(training.flop_budget());
      roles_of_run[absl::StrCat(configuration, " C=", training.flop_budget(),
                                " seed=", training.seed())]
          .insert(member.role());
    }
    EXPECT_EQ(n, in_range.at(member.role()));
    total += n;
  }
  EXPECT_EQ(total, 124);
  EXPECT_EQ(roles_of_run.size(), 109u);
  int shared = 0;
  for (const auto& [run, roles] : roles_of_run) shared += roles.size() == 2;
  EXPECT_EQ(shared, 15);
  for (const auto& [configuration, budget] : budgets) {
    EXPECT_EQ(budget.size(), 1u) << configuration << " is listed at several budgets";
  }
  // The study trains each shared run once (study_sharing.h): the 12 runs at 556M, 32k of the
  // N_act sweep (its dense reference included) and the 4 A = 1 runs and the dense reference
  // of the A x K sweep (X-MoD K = 1 expands to DENSE).
  EXPECT_EQ(static_cast<int>(trained.size()), listed - 17);
}

// The adaptive example queues only its seed set, which the design picks from its grid.
TEST(ExamplesTest, TheAdaptiveExampleQueuesItsSeedSet) {
  const char* source = std::getenv("XMOD_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "run through ctest (XMOD_SOURCE_DIR)";
  absl::StatusOr<std::string> text =
      ReadFile(std::string(source) + "/examples/adaptive_cpu.textpb");
  ASSERT_TRUE(text.ok()) << text.status();
  xmod::v1::SweepSpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, &spec));
  absl::StatusOr<ExpandedSweep> sweep =
      ExpandForSubmission(spec, ExpansionOptions{.check_data_paths = false});
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  const std::vector<xmod::v1::Run>* seed = &sweep->runs;
  double seed_flops = 0;
  for (const xmod::v1::Run& run : *seed) seed_flops += run.spec().training().flop_budget();
  EXPECT_LT(seed->size(), 34u);  // fewer than cpu_b4's configurations
  EXPECT_LT(seed_flops, spec.adaptive().compute_budget());
}

}  // namespace
}  // namespace xmod
