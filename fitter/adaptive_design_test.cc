// Adaptive sweep design: the criterion, the seed design, cost accounting, stopping, and the
// simulator (library and binary).
#include "fitter/adaptive_design.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "fitter/design_sim.h"
#include "fitter/law_json.h"
#include "fitter/two_stage.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace xmod::fitter {
namespace {

using ::testing::HasSubstr;

// The design simulator's space, at one budget.
AdaptiveConfig SimLikeConfig() {
  AdaptiveConfig c;
  for (int l : {2048, 4096, 8192, 16384, 32768}) c.targets.push_back({5e19, l, "556M"});
  for (const char* b : {"165M", "298M", "936M"}) c.targets.push_back({5e19, 32768, b});
  c.ks = {2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 28, 32};
  c.as = {0.5, 1, 2, 3, 4, 5};
  c.seq_lens = {2048, 4096, 8192, 16384, 32768};
  c.backbones = {"165M", "298M", "556M", "936M"};
  c.flop_budgets = {5e19};
  c.compute_budget = 5e21;
  c.bootstrap_samples = 8;
  return c;
}

// The sparse seed runs as observations with Δ from Table 8 plus noise; flops left 0 so they
// say nothing about dense references.
std::vector<Observation> SeedObservations(const AdaptiveConfig& config, double sigma) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0.0, sigma);
  std::vector<Observation> out;
  const std::vector<Candidate> seed = *SeedDesign(config);
  for (const Candidate& c : seed) {
    if (c.IsDense()) continue;
    Observation o = *MakeDeltaObservation(c.Describe(), c.backbone, c.seq_len, c.k, c.a, 0.0);
    o.delta = PredictDelta(Table8Params(), o.point()) + noise(rng);
    out.push_back(o);
  }
  return out;
}

TEST(AdaptiveDesignTest, ValueIsForRunsThatCanChangeTheAnswer) {
  // One target, two options; members 0 and 1 prefer option 0, member 2 option 1.
  const std::vector<std::vector<std::vector<double>>> deltas = {
      {{0.0, 0.01}, {0.0, 0.01}, {0.01, 0.0}}};
  const double noise = 0.003;
  // Separates member 2 from the others: settles the answer, removing its expected regret
  // (member 2's 0.01 regret over three members).
  const double decisive = ExpectedRegretReduction(deltas, {0.0, 0.0, 0.05}, noise);
  // As spread out, but separates two members that agree on the answer.
  const double beside = ExpectedRegretReduction(deltas, {0.0, 0.05, 0.0}, noise);
  // Every member predicts the same.
  const double agreed = ExpectedRegretReduction(deltas, {0.02, 0.02, 0.02}, noise);
  EXPECT_NEAR(decisive, 0.01 / 3, 1e-6);
  EXPECT_NEAR(beside, 0.0, 1e-9);
  EXPECT_NEAR(agreed, 0.0, 1e-12);
  // Noise as large as the disagreement leaves most of the doubt.
  EXPECT_LT(ExpectedRegretReduction(deltas, {0.0, 0.0, 0.05}, 0.1), decisive / 4);
}

TEST(AdaptiveDesignTest, SeedDesignIdentifiesBothStages) {
  const AdaptiveConfig config = SimLikeConfig();
  const std::vector<Candidate> seed = *SeedDesign(config);
  int dense = 0, base = 0, anchored = 0;
  std::set<int> anchored_ks, lens;
  std::set<std::string> backbones;
  bool dense_first = true;
  for (const Candidate& c : seed) {
    EXPECT_EQ(c.flops, 5e19) << c.Describe();
    if (c.IsDense()) {
      dense_first = dense_first && base + anchored == 0;
      ++dense;
    } else if (c.a == 1.0) {
      ++base;
      lens.insert(c.seq_len);
      backbones.insert(c.backbone);
    } else {
      ++anchored;
      anchored_ks.insert(c.k);
    }
  }
  EXPECT_TRUE(dense_first);
  EXPECT_EQ(base, 13);
  EXPECT_EQ(anchored, 4);
  EXPECT_GE(anchored_ks.size(), 2u);
  EXPECT_EQ(lens.size(), 3u);
  EXPECT_EQ(backbones.size(), 3u);
  EXPECT_EQ(dense, 5);  // 556M at 3 L, 165M and 936M at 32k
  EXPECT_TRUE(FitTwoStage(SeedObservations(config, 0.001), FitOptions{}).ok());
}

TEST(AdaptiveDesignTest, BeforeAFitProposesTheSeedRuns) {
  const AdaptiveConfig config = SimLikeConfig();
  const Decision d = *Decide(config, DesignState{});
  EXPECT_FALSE(d.stop);
  EXPECT_FALSE(d.fit_error.empty());
  EXPECT_TRUE(d.answers.empty());
  ASSERT_EQ(d.ranked.size(), 8u);  // max_proposals
  EXPECT_TRUE(d.ranked.front().run.IsDense());
  EXPECT_THAT(d.ranked.front().reason, HasSubstr("seed design"));
}

TEST(AdaptiveDesignTest, ADecisionStopsOnceCancelled) {
  AdaptiveConfig config = SimLikeConfig();
  DesignState state;
  state.completed = SeedObservations(config, 0.003);
  // Polled before every refit of the ensemble and every candidate valued.
  int polls = 0;
  config.cancelled = [&polls] {
    ++polls;
    return false;
  };
  ASSERT_TRUE(Decide(config, state).ok());
  const int all_polls = polls;
  EXPECT_GT(all_polls, config.bootstrap_samples + 2);
  // Cancelled before it starts: no fit, and no seed decision instead of one.
  config.cancelled = [] { return true; };
  EXPECT_EQ(Decide(config, state).status().code(), absl::StatusCode::kCancelled);
  // Cancelled partway, in the ensemble and in the valuation: it stops at the next poll.
  for (const int at : {3, all_polls - 1}) {
    polls = 0;
    config.cancelled = [&polls, at] { return ++polls >= at; };
    EXPECT_EQ(Decide(config, state).status().code(), absl::StatusCode::kCancelled) << at;
    EXPECT_EQ(polls, at);
  }
}

TEST(AdaptiveDesignTest, CostCountsAMissingDenseReference) {
  AdaptiveConfig config = SimLikeConfig();
  config.max_proposals = 24;
  DesignState state;
  state.completed = SeedObservations(config, 0.003);
  state.dense_done = {{"556M", 2048, 1, 1.0, 5e19}};
  state.compute_spent = 1e21;
  const Decision d = *Decide(config, state);
  ASSERT_FALSE(d.stop) << d.stop_reason;
  ASSERT_EQ(d.ranked.size(), 24u);
  std::set<std::pair<std::string, int>> covered = {{"556M", 2048}};
  int with_dense = 0;
  for (const Proposal& p : d.ranked) {
    const bool missing = covered.insert({p.run.backbone, p.run.seq_len}).second;
    EXPECT_EQ(p.needs_dense, missing) << p.run.Describe();
    EXPECT_DOUBLE_EQ(p.cost_flops, missing ? 1e20 : 5e19) << p.run.Describe();
    EXPECT_FALSE(p.reason.empty());
    with_dense += missing ? 1 : 0;
  }
  EXPECT_GT(with_dense, 0);
  EXPECT_GT(d.ranked.front().value, 0.0);
  EXPECT_THAT(d.ranked.front().reason, HasSubstr("decides"));
  EXPECT_EQ(d.answers.size(), config.targets.size());
}

TEST(AdaptiveDesignTest, InFlightRunsAreNotProposedAgain) {
  AdaptiveConfig config = SimLikeConfig();
  DesignState state;
  state.completed = SeedObservations(config, 0.003);
  const Decision first = *Decide(config, state);
  ASSERT_FALSE(first.ranked.empty());
  state.in_flight = {first.ranked.front().run};
  const Decision second = *Decide(config, state);
  for (const Proposal& p : second.ranked) {
    EXPECT_NE(p.run.Describe(), first.ranked.front().run.Describe());
  }
}

TEST(AdaptiveDesignTest, StopsWhenTheBudgetIsSpent) {
  AdaptiveConfig config = SimLikeConfig();
  DesignState state;
  state.completed = SeedObservations(config, 0.003);
  state.compute_spent = config.compute_budget;
  const Decision d = *Decide(config, state);
  EXPECT_TRUE(d.stop);
  EXPECT_THAT(d.stop_reason, HasSubstr("compute budget spent"));
  EXPECT_TRUE(d.ranked.empty());
}

TEST(AdaptiveDesignTest, StopsWhenTheAnswersHoldWithinToleranceAndNothingIsInFlight) {
  AdaptiveConfig config = SimLikeConfig();
  config.tolerance = 1.0;  // any expected regret is small enough
  config.stable_decisions = 2;
  DesignState state;
  state.completed = SeedObservations(config, 0.003);
  const Decision first = *Decide(config, state);
  EXPECT_FALSE(first.stop);
  EXPECT_EQ(first.streak, 1);
  state.previous_answers = first.answers;
  state.previous_streak = first.streak;
  const Decision second = *Decide(config, state);
  EXPECT_TRUE(second.stop);
  EXPECT_EQ(second.streak, 2);
  EXPECT_THAT(second.stop_reason, HasSubstr("unchanged for 2 decisions"));
  // With runs in flight (a seed set still training, say) the same confidence waits for their
  // evidence instead of stopping on an answer they might overturn, and queues nothing more.
  ASSERT_GE(first.ranked.size(), 2u);
  DesignState in_flight = state;
  in_flight.in_flight = {first.ranked[0].run, first.ranked[1].run};
  const Decision waiting = *Decide(config, in_flight);
  EXPECT_FALSE(waiting.stop) << waiting.stop_reason;
  EXPECT_THAT(waiting.held_back, HasSubstr("2 runs in flight"));
  EXPECT_TRUE(waiting.ranked.empty());
  // A strict tolerance keeps going on the same evidence.
  config.tolerance = 0;
  const Decision strict = *Decide(config, state);
  double bound = 0;
  for (const TargetAnswer& a : strict.answers) {
    bound += a.regret_bound;
    EXPECT_EQ(a.confidence, config.confidence);
    EXPECT_GE(a.regret_bound, 0);
  }
  EXPECT_EQ(strict.stop, bound == 0);
}

TEST(AdaptiveDesignTest, AConfidentDesignDoesNotStopAgainstItsOwnRuns) {
  AdaptiveConfig config = SimLikeConfig();
  config.tolerance = 1.0;  // the ensemble is confident enough
  DesignState state;
  state.completed = SeedObservations(config, 0.001);
  // Every K at A = 1 measured at the target, from the law: the ensemble is tight there.
  const Target& at = config.targets[1];
  for (int k : config.ks) {
    if (k == 8) continue;
    Observation o = *MakeDeltaObservation("at target", at.backbone, at.seq_len, k, 1, 0.0);
    o.delta = PredictDelta(Table8Params(), o.point());
    o.flops = at.flops;
    state.completed.push_back(o);
  }
  // Four seeds at the target measured 0.05 nats worse than the law that made the rest.
  Observation odd = *MakeDeltaObservation("odd", config.targets[1].backbone,
                                          config.targets[1].seq_len, 8, 1, 0.0);
  odd.delta = PredictDelta(Table8Params(), odd.point()) + 0.05;
  odd.flops = config.targets[1].flops;
  odd.replicates = 4;
  state.completed.push_back(odd);
  const Decision first = *Decide(config, state);
  state.previous_answers = first.answers;
  state.previous_streak = first.streak;
  const Decision second = *Decide(config, state);
  EXPECT_FALSE(second.stop) << second.stop_reason;
  EXPECT_THAT(second.held_back, HasSubstr("confident, yet not stopping"));
  EXPECT_THAT(second.held_back, HasSubstr("K=8"));
  EXPECT_FALSE(second.ranked.empty());
}

// A partial run's forecast is evidence as certain as its sd: a tight forecast settles the
// members' Δ there, a loose one leaves them spread; both are named in the reasons.
TEST(AdaptiveDesignTest, PartialRunsInformTheEnsembleAsFarAsTheirForecast) {
  AdaptiveConfig config = SimLikeConfig();
  DesignState state;
  state.completed = SeedObservations(config, 0.003);
  PartialRun partial;
  partial.forecast = *MakeDeltaObservation("partial", "556M", 8192, 12, 2, 0.0);
  partial.forecast.delta = PredictDelta(Table8Params(), partial.forecast.point());
  partial.forecast.flops = 5e19;
  partial.forecast.run_id = 9001;
  partial.last_fraction = 0.4;
  auto spread_there = [&](double sd) {
    partial.forecast_sd = sd;
    state.partial = {partial};
    const Decision d = *Decide(config, state);
    EXPECT_THAT(d.partial_evidence, HasSubstr("1 partial run in the fit"));
    EXPECT_THAT(d.partial_evidence, HasSubstr("40% of its budget"));
    for (const Proposal& p : d.ranked) EXPECT_THAT(p.reason, HasSubstr("partial run"));
    // The members' Δ at a target whose answer the run bears on.
    double spread = 0;
    for (const TargetAnswer& a : d.answers) spread += a.delta_sd;
    return spread;
  };
  EXPECT_LT(spread_there(1e-4), spread_there(0.2));
}

TEST(AdaptiveDesignTest, BadConfigNamesTheField) {
  AdaptiveConfig config = SimLikeConfig();
  config.as = {1, -2};
  EXPECT_THAT(Decide(config, DesignState{}).status().message(), HasSubstr("as:"));
  config = SimLikeConfig();
  config.backbones.push_back("no-such-backbone");
  EXPECT_THAT(SeedDesign(config).status().message(), HasSubstr("backbones: no-such-backbone"));
  config = SimLikeConfig();
  config.compute_budget = 0;
  EXPECT_THAT(ValidateConfig(config).message(), HasSubstr("compute_budget"));
}

TEST(DesignSimTest, LawParamsJsonNamesTheKey) {
  const LawParams p = *LawParamsFromJson(
      R"({"e": 0.01848, "u": 0.93519, "eta_n": 0.07784, "rho_n": 1.19538, "w": 105.21108,
          "eta_l": 0.92624, "rho_l": 0.48494, "z": 0.07455, "rho_k": 0.799, "rho_a": 0.28293})");
  EXPECT_DOUBLE_EQ(p.w, 105.21108);
  EXPECT_DOUBLE_EQ(p.rho_a, 0.28293);
  EXPECT_THAT(LawParamsFromJson(R"({"e": 0})").status().message(), HasSubstr("\"u\""));
  EXPECT_THAT(
      LawParamsFromJson(R"({"e":0,"u":0,"eta_n":0,"rho_n":0,"w":0,"eta_l":0,"rho_l":0,"z":0,)"
                        R"("rho_k":0,"rho_a":0,"zeta":1})")
          .status()
          .message(),
      HasSubstr("unknown key \"zeta\""));
  EXPECT_THAT(LawParamsFromJson("[1]").status().message(), HasSubstr("not a JSON object"));
  // xmod-fit's params now carry Eq. 24's exposure keys (0 for Eq. 14): accepted.
  absl::StatusOr<LawParams> full =
      LawParamsFromJson(R"({"e":0,"u":0,"eta_n":0,"rho_n":0,"w":0,"eta_l":0,"rho_l":0,"z":0,)"
                        R"("rho_k":0,"rho_a":0,"v":0.2,"eta_d":0.3,"rho_d":1})");
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->v, 0.2);
  EXPECT_EQ(full->rho_d, 1.0);
}

// The compute from which on the mean regret stays at or below `regret`.
double ComputeToReach(const xmod::v1::DesignSimReport& report, double regret) {
  double reached = -1;
  for (const auto& p : report.curve()) {
    if (p.regret() <= regret + 1e-12) {
      if (reached < 0) reached = p.compute_flops();
    } else {
      reached = -1;
    }
  }
  return reached;
}

// One repetition on Table 8 at σ = 0.002.
DesignSimOptions OneRepOnTable8(uint64_t seed, int bootstrap_samples) {
  DesignSimOptions options;
  options.truth = Table8Params();
  options.sigma = 0.002;
  options.reps = 1;
  options.seed = seed;
  options.bootstrap_samples = bootstrap_samples;
  return options;
}

TEST(DesignSimTest, AdaptiveReachesTheGridRegretWithLessCompute) {
  DesignSimOptions options = OneRepOnTable8(5, 16);
  options.strategy = "grid";
  const xmod::v1::DesignSimReport grid = *RunDesignSim(options);
  options.strategy = "adaptive";
  const xmod::v1::DesignSimReport adaptive = *RunDesignSim(options);
  EXPECT_NEAR(grid.compute_flops(), 5.45e21, 1e9);  // 97 runs at 5e19 + 20 at 3e19
  ASSERT_GT(adaptive.curve_size(), 0);
  const double reached = ComputeToReach(adaptive, grid.regret());
  EXPECT_GT(reached, 0) << "adaptive never reached the grid's regret " << grid.regret();
  EXPECT_LT(reached, grid.compute_flops());
  EXPECT_LE(adaptive.regret(), grid.regret() + 1e-12);
}

// Learning curves: runs report at every mark, the design forecasts partial runs, stops some
// early and may resume them; the regret is scored against the truth as without curves.
TEST(DesignSimTest, LearningCurvesAreSimulatedWithEarlyStopping) {
  DesignSimOptions options = OneRepOnTable8(9, 8);
  options.marks = 4;
  options.strategy = "adaptive";
  absl::StatusOr<xmod::v1::DesignSimReport> report = RunDesignSim(options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_GT(report->curve_size(), 0);
  EXPECT_GT(report->early_stops(), 0);
  EXPECT_GE(report->regret(), 0);
  EXPECT_LE(report->compute_flops(), 5.45e21 * (1 + 1e-9));
  // Compute on the curve only grows: it is the FLOPs trained so far.
  for (int i = 1; i < report->curve_size(); ++i) {
    EXPECT_GE(report->curve(i).compute_flops(), report->curve(i - 1).compute_flops());
  }
  options.marks = 0;
  EXPECT_THAT(RunDesignSim(options).status().message(), HasSubstr("marks"));
}

TEST(DesignSimTest, BinaryPrintsTheReportKeys) {
  const char* bin = std::getenv("XMOD_BIN_DIR");
  if (bin == nullptr) GTEST_SKIP() << "XMOD_BIN_DIR unset (run through ctest)";
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream truth(dir + "/truth.json");
    truth << R"({"e": 0.01848, "u": 0.93519, "eta_n": 0.07784, "rho_n": 1.19538, "w": 105.21108,
                 "eta_l": 0.92624, "rho_l": 0.48494, "z": 0.07455, "rho_k": 0.799,
                 "rho_a": 0.28293})";
  }
  const std::string cmd = std::string(bin) + "/xmod-design-sim --truth " + dir +
                          "/truth.json --sigma 0.001 --strategy adaptive --reps 1 --seed 2 "
                          "--bootstrap 8 --output json > " +
                          dir + "/report.json";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir + "/report.json");
  std::stringstream text;
  text << in.rdbuf();
  google::protobuf::Struct report;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &report).ok()) << text.str();
  std::set<std::string> keys;
  for (const auto& [key, value] : report.fields()) keys.insert(key);
  EXPECT_EQ(keys, (std::set<std::string>{"strategy", "reps", "compute_flops", "regret",
                                         "k_star_exact", "delta_rmse_at_targets", "curve",
                                         "confident_stops", "stop_claims", "stop_claims_exceeded",
                                         "confidence", "exceeded_share", "allowed_share",
                                         "calibrated", "claimed_regret_mean", "true_regret_mean",
                                         "early_stops", "resumes"}));
  EXPECT_EQ(report.fields().at("strategy").string_value(), "adaptive");
  const auto& curve = report.fields().at("curve").list_value();
  ASSERT_GT(curve.values_size(), 0);
  for (const auto& point : curve.values()) {
    std::set<std::string> point_keys;
    for (const auto& [key, value] : point.struct_value().fields()) point_keys.insert(key);
    EXPECT_EQ(point_keys, (std::set<std::string>{"compute_flops", "regret"}));
  }
  const std::string bad =
      std::string(bin) + "/xmod-design-sim --truth " + dir + "/missing.json 2>/dev/null";
  EXPECT_NE(std::system(bad.c_str()), 0);
}

}  // namespace
}  // namespace xmod::fitter
