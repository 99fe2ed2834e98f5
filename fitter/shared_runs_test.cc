// Runs two B.4 sweeps share are one observation carrying both roles (shared_runs.h): a study
// whose member sweeps each list (and trained) the shared configurations fits as the same
// design run once, counts the paper's 109 in-range observations, and no grouped-CV fold keeps
// a held-out configuration's twin in its training set (validation.h, B.5).
#include "fitter/shared_runs.h"

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_join.h"
#include "fitter/fit_observations.h"
#include "fitter/study_fit.h"
#include "fitter/synthetic.h"
#include "fitter/validation.h"
#include "gtest/gtest.h"

namespace xmod::fitter {
namespace {

constexpr double kPilotBudget = 3e19;  // the 165M runs: Fig. 4's C, shared with the A x K sweep
constexpr double kSweepBudget = 5e19;  // every other B.4 run

// The B.4 design with each configuration once, as the paper counts it: the synthetic
// design's rows (synthetic.h) where the 165M, 32k, A = 1 rows at K in {4, 8, 12, 16} are the
// N_act sweep's and the A x K sweep's (roles nact and axk) and the 556M, 32k rows the K x L
// and N_act sweeps' (kxl and nact). 109 in range.
std::vector<Observation> PaperDesign() {
  SyntheticOptions options;
  options.seed = 5;
  options.sweep_roles = true;
  absl::StatusOr<std::vector<Observation>> rows = PaperSweepObservations(options);
  EXPECT_TRUE(rows.ok()) << rows.status();
  std::vector<Observation> design;
  for (Observation& o : *rows) {
    const bool pilot_anchor = o.backbone == "165M" && o.a == 1.0;
    if (pilot_anchor && o.sweeps == std::vector<SweepRole>{SweepRole::kAxk}) continue;
    if (pilot_anchor && (o.k == 4 || o.k == 8 || o.k == 12 || o.k == 16)) {
      o.sweeps = {SweepRole::kNact, SweepRole::kAxk};
    }
    design.push_back(std::move(o));
  }
  return design;
}

// Run curves for `rows` with the budget and seed every run of the design was trained at.
std::vector<RunCurve> Runs(const std::vector<Observation>& rows) {
  std::vector<RunCurve> runs = RunCurvesFor(rows);
  for (RunCurve& run : runs) {
    run.flop_budget = run.backbone == "165M" ? kPilotBudget : kSweepBudget;
    run.seed = 1;
  }
  return runs;
}

// The design as three member sweeps, each listing every configuration of its sweep: the
// shared ones are planted twice, as separate runs of the same identity.
std::vector<StudyMemberRuns> ThreeMembersWithTwins(const std::vector<Observation>& design) {
  std::vector<StudyMemberRuns> members;
  for (SweepRole role : {SweepRole::kKxl, SweepRole::kNact, SweepRole::kAxk}) {
    std::vector<Observation> part;
    for (const Observation& o : design) {
      if (o.InSweep(role)) part.push_back(o);
    }
    members.push_back({SweepRoleName(role), Runs(part), role});
  }
  return members;
}

// The same design deduplicated: one sweep, each run once, its label naming every role.
std::vector<StudyMemberRuns> OneSweepDeduplicated(const std::vector<Observation>& design) {
  std::vector<RunCurve> runs = Runs(design);
  size_t next = 0;
  for (RunCurve& run : runs) {
    if (!IsObservation(run)) continue;
    std::vector<std::string> roles;
    for (SweepRole role : design[next++].sweeps) roles.push_back(SweepRoleName(role));
    run.label = absl::StrJoin(roles, "+");
  }
  return {{"design", std::move(runs), std::nullopt}};
}

using Configuration = std::tuple<std::string, int, int, double>;

Configuration ConfigurationOf(const Observation& o) { return {o.backbone, o.seq_len, o.k, o.a}; }

SweepFitOptions FastOptions() {
  SweepFitOptions options;
  options.fit.search.population = 16;
  options.fit.search.generations = 60;
  return options;
}

TEST(SharedRunsTest, AStudyCountsEachSharedConfigurationOnceInBothRoles) {
  const std::vector<Observation> design = PaperDesign();
  ASSERT_EQ(design.size(), 109u);
  absl::StatusOr<std::vector<Observation>> observations =
      StudyObservations(ThreeMembersWithTwins(design), ObservationOptions());
  ASSERT_TRUE(observations.ok()) << observations.status();
  ASSERT_EQ(observations->size(), 109u);
  std::set<Configuration> configurations;
  int both_roles = 0;
  for (const Observation& o : *observations) {
    EXPECT_TRUE(configurations.insert(ConfigurationOf(o)).second) << o.Describe();
    both_roles += o.sweeps.size() == 2;
  }
  EXPECT_EQ(both_roles, 11 + 4);  // 556M at 32k (kxl, nact); 165M, 32k, A = 1 (nact, axk)
}

TEST(SharedRunsTest, AStudyWithPlantedTwinsFitsAsTheDeduplicatedDesign) {
  const std::vector<Observation> design = PaperDesign();
  absl::StatusOr<FitReport> twins = FitStudy(ThreeMembersWithTwins(design), FastOptions());
  ASSERT_TRUE(twins.ok()) << twins.status();
  absl::StatusOr<FitReport> dedup = FitStudy(OneSweepDeduplicated(design), FastOptions());
  ASSERT_TRUE(dedup.ok()) << dedup.status();
  EXPECT_EQ(twins->fit.n_obs, 109);
  EXPECT_EQ(twins->fit.n_obs, dedup->fit.n_obs);
  EXPECT_EQ(twins->fit.n_stage1, dedup->fit.n_stage1);
  EXPECT_EQ(twins->fit.n_stage2, dedup->fit.n_stage2);
  for (int i = 0; i < kAllParamCount; ++i) {
    EXPECT_EQ(ParamAt(twins->fit.params, i), ParamAt(dedup->fit.params, i)) << i;
  }
  EXPECT_EQ(twins->fit.r2, dedup->fit.r2);
  ASSERT_EQ(twins->cv.size(), dedup->cv.size());
  for (size_t i = 0; i < twins->cv.size(); ++i) {
    SCOPED_TRACE(twins->cv[i].group);
    EXPECT_EQ(twins->cv[i].group, dedup->cv[i].group);
    EXPECT_EQ(twins->cv[i].n, dedup->cv[i].n);
    EXPECT_EQ(twins->cv[i].rmse, dedup->cv[i].rmse);
  }
}

TEST(SharedRunsTest, NoFoldKeepsAHeldOutConfigurationsTwin) {
  absl::StatusOr<std::vector<Observation>> observations =
      StudyObservations(ThreeMembersWithTwins(PaperDesign()), ObservationOptions());
  ASSERT_TRUE(observations.ok()) << observations.status();
  const std::vector<CvFold> folds = MakeCvFolds(*observations);
  ASSERT_FALSE(folds.empty());
  bool saw_32k = false;
  for (const CvFold& fold : folds) {
    SCOPED_TRACE(fold.group);
    std::set<int> out(fold.indices.begin(), fold.indices.end());
    out.insert(fold.excluded.begin(), fold.excluded.end());
    std::set<Configuration> held_out;
    for (int i : out) held_out.insert(ConfigurationOf((*observations)[i]));
    for (int i = 0; i < static_cast<int>(observations->size()); ++i) {
      if (out.count(i) > 0) continue;
      EXPECT_EQ(held_out.count(ConfigurationOf((*observations)[i])), 0u)
          << (*observations)[i].Describe() << " is fitted while its twin is held out";
    }
    if (fold.group != "L=32768") continue;
    // B.5: "we hold out all sparse runs with one sequence length L", whichever sweep lists them.
    saw_32k = true;
    for (int i = 0; i < static_cast<int>(observations->size()); ++i) {
      if ((*observations)[i].seq_len == 32768) {
        EXPECT_EQ(out.count(i), 1u) << (*observations)[i].Describe();
      }
    }
  }
  EXPECT_TRUE(saw_32k);
}

TEST(SharedRunsTest, TheSameRunListedTwiceInOneSweepIsOneObservation) {
  const std::vector<Observation> design = PaperDesign();
  std::vector<RunCurve> runs = Runs(design);
  const size_t n = runs.size();
  for (size_t i = 0; i < n; ++i) {
    if (!IsObservation(runs[i]) || runs[i].seq_len != 2048) continue;
    RunCurve twin = runs[i];
    twin.run_id += 10000;
    runs.push_back(twin);
  }
  absl::StatusOr<std::vector<Observation>> with_twins = BuildObservations(runs);
  ASSERT_TRUE(with_twins.ok()) << with_twins.status();
  absl::StatusOr<std::vector<Observation>> without = BuildObservations(Runs(design));
  ASSERT_TRUE(without.ok()) << without.status();
  ASSERT_EQ(with_twins->size(), without->size());
  for (size_t i = 0; i < without->size(); ++i) {
    EXPECT_EQ((*with_twins)[i].delta, (*without)[i].delta) << (*without)[i].Describe();
    EXPECT_EQ((*with_twins)[i].replicates, 1);
  }
}

TEST(SharedRunsTest, ObservationsWithoutARunIdentityAreKept) {
  absl::StatusOr<Observation> row = MakeDeltaObservation("row 1", "556M", 2048, 4, 1, -0.01);
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_FALSE(HasRunIdentity(*row));
  EXPECT_EQ(MergeSharedRuns({*row, *row}).size(), 2u);
}

}  // namespace
}  // namespace xmod::fitter
