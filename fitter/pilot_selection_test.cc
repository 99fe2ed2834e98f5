// The B.3 pilot rule (pilot_selection.h): the budget boundary, ties, N_act / K / L / C
// matching, replicate means, unfinished runs, the baseline of each sparsity group, refusals.
#include "fitter/pilot_selection.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace xmod::fitter {
namespace {

using xmod::v1::PilotConfiguration;
using xmod::v1::SelectPilotResponse;

int64_t next_id = 1;

PilotRun Xmod(int k, double a, double total_params, std::optional<double> loss,
              xmod::v1::RunState state = xmod::v1::SUCCEEDED, std::string backbone = "165M") {
  PilotRun r;
  r.run_id = next_id++;
  r.state = state;
  r.arch = xmod::v1::XMOD;
  r.backbone = backbone;
  r.seq_len = 32768;
  r.flop_budget = 3e19;
  r.k = k;
  r.a = a;
  r.total_params = total_params;
  r.final_val_loss = loss;
  r.replicate_key = absl::StrCat("xmod ", backbone, " ", k, " ", a, " ", r.seq_len);
  return r;
}

PilotRun Moe(const std::string& moe, double total_params, std::optional<double> loss,
             xmod::v1::RunState state = xmod::v1::SUCCEEDED) {
  PilotRun r;
  r.run_id = next_id++;
  r.state = state;
  r.arch = xmod::v1::MOE;
  r.backbone = "165M";
  r.seq_len = 32768;
  r.flop_budget = 3e19;
  r.moe = moe;
  r.total_params = total_params;
  r.final_val_loss = loss;
  r.replicate_key = "moe " + moe;
  return r;
}

const PilotConfiguration& Pick(const SelectPilotResponse& r, int selection) {
  return r.configurations(r.selections(selection).pick_index());
}

std::vector<std::string> Labels(const SelectPilotResponse& r,
                                const google::protobuf::RepeatedField<int32_t>& indices) {
  std::vector<std::string> out;
  for (int i : indices) out.push_back(r.configurations(i).label());
  return out;
}

// "without exceeding its total-parameter budget": N equal to the MoE's is within it, one
// parameter more is not, however low its loss.
TEST(PilotSelectionTest, BudgetBoundaryIsInclusive) {
  const std::vector<PilotRun> runs = {Moe("8:64+0", 1000, 3.10), Xmod(8, 4, 1000, 3.05),
                                      Xmod(8, 5, 1001, 2.90), Xmod(8, 2, 600, 3.08)};
  absl::StatusOr<SelectPilotResponse> r = SelectPilot(7, runs);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->selections_size(), 1);
  EXPECT_EQ(Pick(*r, 0).label(), "A4K8");
  EXPECT_EQ(Labels(*r, r->selections(0).within_budget()),
            (std::vector<std::string>{"A4K8", "A2K8"}));
  EXPECT_EQ(Labels(*r, r->selections(0).over_budget()), (std::vector<std::string>{"A5K8"}));
  EXPECT_FALSE(r->selections(0).provisional());
  EXPECT_EQ(r->sweep_id(), 7);
}

// Equal measured losses: fewer total parameters first, then the smaller A.
TEST(PilotSelectionTest, TiesGoToFewerParametersThenSmallerA) {
  absl::StatusOr<SelectPilotResponse> r = SelectPilot(
      1, {Moe("8:64+0", 1000, 3.2), Xmod(8, 4, 900, 3.0), Xmod(8, 3, 800, 3.0)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Pick(*r, 0).label(), "A3K8");
  r = SelectPilot(1, {Moe("8:64+0", 1000, 3.2), Xmod(8, 4, 800, 3.0), Xmod(8, 3, 800, 3.0)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Pick(*r, 0).label(), "A3K8");
}

// Only the same nominal K (MoE: routed / active incl. shared, so 6:64+2 is K = 8), the same
// backbone (N_act), L and budget compete.
TEST(PilotSelectionTest, MatchesNactAndNominalK) {
  PilotRun other_l = Xmod(8, 1, 500, 2.0);
  other_l.seq_len = 4096;
  other_l.replicate_key += " L4096";
  PilotRun other_c = Xmod(8, 1, 500, 2.0);
  other_c.flop_budget = 5e19;
  other_c.replicate_key += " C5e19";
  absl::StatusOr<SelectPilotResponse> r =
      SelectPilot(1, {Moe("6:64+2", 1000, 3.2), Xmod(16, 1, 500, 2.5), Xmod(8, 1, 700, 3.1),
                      Xmod(8, 2, 600, 2.0, xmod::v1::SUCCEEDED, "298M"), other_l, other_c});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->selections_size(), 1);
  const PilotConfiguration& moe = r->configurations(r->selections(0).moe_index());
  EXPECT_EQ(moe.k(), 8);
  EXPECT_EQ(moe.label(), "MoE 8:64s2");
  EXPECT_EQ(Pick(*r, 0).label(), "A1K8");
  EXPECT_EQ(Pick(*r, 0).backbone(), "165M");
  EXPECT_EQ(Pick(*r, 0).seq_len(), 32768);
  EXPECT_EQ(Pick(*r, 0).flop_budget(), 3e19);
  EXPECT_EQ(r->selections(0).within_budget_size(), 1);
}

// Replicate seeds are averaged: A4K8's two seeds (3.00, 3.20) average 3.10 > A2K8's 3.05.
TEST(PilotSelectionTest, ReplicateSeedsAreAveraged) {
  absl::StatusOr<SelectPilotResponse> r =
      SelectPilot(1, {Moe("8:64+0", 1000, 3.3), Xmod(8, 4, 900, 3.00), Xmod(8, 4, 900, 3.20),
                      Xmod(8, 2, 800, 3.05)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Pick(*r, 0).label(), "A2K8");
  const PilotConfiguration& a4 = r->configurations(r->selections(0).within_budget(1));
  EXPECT_EQ(a4.label(), "A4K8");
  EXPECT_EQ(a4.runs(), 2);
  EXPECT_EQ(a4.runs_succeeded(), 2);
  EXPECT_DOUBLE_EQ(a4.val_loss(), 3.10);
}

// A configuration with a run still queued or running is no candidate, listed as pending and
// making the pick provisional; one whose runs all failed has no result; a failed replicate
// beside a succeeded one is left out of the mean.
TEST(PilotSelectionTest, UnfinishedRunsAreExcludedAndListed) {
  absl::StatusOr<SelectPilotResponse> r = SelectPilot(
      1, {Moe("8:64+0", 1000, 3.3), Xmod(8, 5, 950, 2.0), Xmod(8, 5, 950, std::nullopt,
                                                              xmod::v1::RUNNING),
          Xmod(8, 3, 900, std::nullopt, xmod::v1::FAILED), Xmod(8, 2, 800, 3.1),
          Xmod(8, 2, 800, std::nullopt, xmod::v1::FAILED)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Pick(*r, 0).label(), "A2K8");
  EXPECT_DOUBLE_EQ(Pick(*r, 0).val_loss(), 3.1);
  EXPECT_EQ(Pick(*r, 0).runs(), 2);
  EXPECT_EQ(Pick(*r, 0).runs_succeeded(), 1);
  EXPECT_TRUE(r->selections(0).provisional());
  EXPECT_EQ(Labels(*r, r->selections(0).within_budget()),
            (std::vector<std::string>{"A2K8", "A3K8", "A5K8"}));
  const auto status_of = [&](const std::string& label) {
    for (const PilotConfiguration& c : r->configurations()) {
      if (c.label() == label) return c.status();
    }
    return xmod::v1::PILOT_STATUS_UNSPECIFIED;
  };
  EXPECT_EQ(status_of("A5K8"), xmod::v1::PILOT_PENDING);
  EXPECT_EQ(status_of("A3K8"), xmod::v1::PILOT_NO_RESULT);
  EXPECT_EQ(status_of("A2K8"), xmod::v1::PILOT_MEASURED);
}

// Each MoE gets its pick; the lowest-loss MoE of each sparsity group is its baseline; a MoE
// whose budget no X-MoD fits, or whose K no X-MoD has, says why.
TEST(PilotSelectionTest, EveryMoeHasASelectionAndEachGroupABaseline) {
  absl::StatusOr<SelectPilotResponse> r =
      SelectPilot(1, {Moe("8:64+0", 1000, 3.15), Moe("6:64+2", 1100, 3.12), Moe("4:16+0", 300, 3.3),
                      Moe("8:128+0", 2000, 3.1), Xmod(8, 4, 1050, 3.0), Xmod(16, 3, 1900, 3.05)});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->selections_size(), 4);
  std::map<std::string, const xmod::v1::PilotSelection*> by_moe;
  for (const auto& s : r->selections()) by_moe[r->configurations(s.moe_index()).label()] = &s;
  EXPECT_FALSE(by_moe["MoE 8:64"]->baseline());
  EXPECT_EQ(by_moe["MoE 8:64"]->pick_index(), -1);
  EXPECT_NE(by_moe["MoE 8:64"]->reason().find("more than"), std::string::npos);
  EXPECT_TRUE(by_moe["MoE 8:64s2"]->baseline());
  EXPECT_EQ(r->configurations(by_moe["MoE 8:64s2"]->pick_index()).label(), "A4K8");
  EXPECT_TRUE(by_moe["MoE 4:16"]->baseline());
  EXPECT_NE(by_moe["MoE 4:16"]->reason().find("no X-MoD configuration at K = 4"),
            std::string::npos);
  EXPECT_TRUE(by_moe["MoE 8:128"]->baseline());
  EXPECT_EQ(r->configurations(by_moe["MoE 8:128"]->pick_index()).label(), "A3K16");
  // Fig. 4's order: by K, then total parameters.
  std::vector<std::string> order;
  for (const PilotConfiguration& c : r->configurations()) order.push_back(c.label());
  EXPECT_EQ(order, (std::vector<std::string>{"MoE 4:16", "MoE 8:64", "A4K8", "MoE 8:64s2",
                                             "A3K16", "MoE 8:128"}));
}

TEST(PilotSelectionTest, NonWholeNominalKMatchesNothing) {
  absl::StatusOr<SelectPilotResponse> r =
      SelectPilot(1, {Moe("3:8+0", 1000, 3.2), Xmod(2, 1, 500, 3.0), Xmod(3, 1, 500, 3.0)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->configurations(r->selections(0).moe_index()).k(), 0);
  EXPECT_EQ(r->selections(0).pick_index(), -1);
  EXPECT_NE(r->selections(0).reason().find("not whole"), std::string::npos);
}

TEST(PilotSelectionTest, RefusesWhatIsNotAPilot) {
  PilotRun dense = Xmod(1, 1, 500, 3.3);
  dense.arch = xmod::v1::DENSE;
  absl::StatusOr<SelectPilotResponse> r = SelectPilot(4, {dense, Xmod(8, 1, 500, 3.0)});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("sweep 4 is not a pilot: it has 0 MoE"), std::string::npos)
      << r.status();
  r = SelectPilot(4, {Moe("8:64+0", 1000, 3.2)});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("0 X-MoD"), std::string::npos) << r.status();
  r = SelectPilot(4, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PilotSelectionTest, RefusesAPilotWithNoFinishedRun) {
  absl::StatusOr<SelectPilotResponse> r =
      SelectPilot(5, {Moe("8:64+0", 1000, std::nullopt, xmod::v1::QUEUED),
                      Xmod(8, 1, 500, std::nullopt, xmod::v1::RUNNING),
                      Xmod(8, 2, 500, std::nullopt, xmod::v1::FAILED)});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("no finished run"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("2 of 3 configurations queued or running"),
            std::string::npos)
      << r.status();
}

TEST(PilotSelectionTest, RefusesAnUnreadableMoeLayout) {
  absl::StatusOr<SelectPilotResponse> r =
      SelectPilot(5, {Moe("8x64", 1000, 3.2), Xmod(8, 1, 500, 3.0)});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'8x64' is not active:total+shared"), std::string::npos)
      << r.status();
}

// Runs that differ only in the seed share a key; any other difference separates them.
TEST(PilotSelectionTest, ReplicateKeyIgnoresOnlySeedAndAttempt) {
  xmod::v1::RunSpec a;
  a.mutable_model()->set_arch(xmod::v1::XMOD);
  a.mutable_model()->set_k(8);
  a.mutable_training()->set_seed(1);
  a.set_run_id(3);
  a.set_checkpoint_dir("/ckpt/run-3");
  xmod::v1::RunSpec b = a;
  b.mutable_training()->set_seed(2);
  b.set_run_id(4);
  b.set_attempt(2);
  b.set_checkpoint_dir("/ckpt/run-4");
  EXPECT_EQ(ReplicateKey(a), ReplicateKey(b));
  b.mutable_model()->set_a(4);
  EXPECT_NE(ReplicateKey(a), ReplicateKey(b));
}

}  // namespace
}  // namespace xmod::fitter
