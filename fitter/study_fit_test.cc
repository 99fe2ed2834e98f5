// FitStudy: observations are built per member sweep, so a sparse run is measured against a
// dense reference of its own sweep even where sweeps share (L, backbone); a member's role
// overrides its runs' labels, "design" (no role) keeps them; errors name the member.
#include "fitter/study_fit.h"

#include <algorithm>
#include <vector>

#include "fitter/synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod::fitter {
namespace {

using ::testing::HasSubstr;

// The B.4 design as three sweeps (fitter/synthetic.h, sweep_roles): 56 kxl rows, 44 nact
// rows (556M at 32k included), 24 axk rows (its own A = 1 runs included), each sweep with
// its own dense references. The kxl member keeps its labels (role "design"); the others lose
// theirs and take the member's role. The axk sweep's curves, dense and sparse, sit 0.5 nats
// higher: a sweep with a baseline of its own.
std::vector<StudyMemberRuns> ThreeSweeps(std::vector<Observation>* expected) {
  SyntheticOptions options;
  options.seed = 3;
  options.sweep_roles = true;
  absl::StatusOr<std::vector<Observation>> all = PaperSweepObservations(options);
  EXPECT_TRUE(all.ok()) << all.status();
  std::vector<StudyMemberRuns> members;
  for (SweepRole role : {SweepRole::kKxl, SweepRole::kNact, SweepRole::kAxk}) {
    std::vector<Observation> part;
    for (const Observation& o : *all) {
      if (o.InSweep(role)) part.push_back(o);
    }
    expected->insert(expected->end(), part.begin(), part.end());
    StudyMemberRuns member;
    member.name = SweepRoleName(role);
    member.runs = RunCurvesFor(part);
    if (role != SweepRole::kKxl) {
      member.role = role;
      for (RunCurve& run : member.runs) run.label = "";
    }
    if (role == SweepRole::kAxk) {
      for (RunCurve& run : member.runs) {
        for (CurvePoint& p : run.points) p.loss += 0.5;
      }
    }
    members.push_back(std::move(member));
  }
  return members;
}

SweepFitOptions FastOptions() {
  SweepFitOptions options;
  options.cross_validate = false;
  options.fit.search.population = 16;
  options.fit.search.generations = 80;
  return options;
}

TEST(StudyFitTest, MatchesDenseReferencesWithinEachSweepAndAssignsMemberRoles) {
  std::vector<Observation> expected;
  const std::vector<StudyMemberRuns> members = ThreeSweeps(&expected);
  absl::StatusOr<FitReport> report = FitStudy(members, FastOptions());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->fit.by_sweep);
  EXPECT_EQ(report->fit.n_obs, 124);
  EXPECT_EQ(report->fit.n_stage1, 100);
  EXPECT_EQ(report->fit.n_stage2, 24);
  ASSERT_EQ(report->observations.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const Observation& got = report->observations[i];
    SCOPED_TRACE(got.Describe());
    // The 0.5 shift of the axk sweep cancels against its own dense curve.
    EXPECT_NEAR(got.delta, expected[i].delta, 1e-9);
    // One role per row: the member's (nact, axk) or the label's (kxl).
    ASSERT_EQ(got.sweeps.size(), 1u);
    EXPECT_TRUE(expected[i].InSweep(got.sweeps.front()));
  }
}

TEST(StudyFitTest, ErrorsNameTheMember) {
  std::vector<Observation> expected;
  std::vector<StudyMemberRuns> members = ThreeSweeps(&expected);
  std::vector<RunCurve>& nact = members[1].runs;
  nact.erase(std::remove_if(nact.begin(), nact.end(), IsDenseReference), nact.end());
  absl::StatusOr<FitReport> report = FitStudy(members, FastOptions());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("nact: group L=32768 backbone="));
  EXPECT_THAT(report.status().message(), HasSubstr("has no dense reference run"));
}

}  // namespace
}  // namespace xmod::fitter
