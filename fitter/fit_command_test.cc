// xmod-fit as a library (CSV in, JSON or table out) and the CSV format.
#include "fitter/fit_command.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fitter/csv_input.h"
#include "fitter/synthetic.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod::fitter {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/xmod_fitter_" + name;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

TEST(CsvTest, RoundTripsObservations) {
  SyntheticOptions so;
  so.out_of_range = true;
  const std::vector<Observation> obs = *PaperSweepObservations(so);
  absl::StatusOr<std::vector<Observation>> back = ParseDeltaCsv(WriteDeltaCsv(obs));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), obs.size());
  for (size_t i = 0; i < obs.size(); ++i) {
    EXPECT_EQ((*back)[i].backbone, obs[i].backbone);
    EXPECT_EQ((*back)[i].k, obs[i].k);
    EXPECT_EQ((*back)[i].a, obs[i].a);
    EXPECT_EQ((*back)[i].delta, obs[i].delta);
    EXPECT_EQ((*back)[i].held_out, obs[i].held_out);
    EXPECT_DOUBLE_EQ((*back)[i].capacity_ratio, obs[i].capacity_ratio);
  }
}

TEST(CsvTest, ErrorsNameLineAndColumn) {
  EXPECT_THAT(ParseDeltaCsv("n_act,L,K,delta\n556e6,2048,4,0.1\n").status().message(),
              HasSubstr("lacks column 'A'"));
  EXPECT_THAT(ParseDeltaCsv("n_act,L,K,A,delta\n556e6,2048,four,1,0.1\n").status().message(),
              HasSubstr("line 2, column K"));
  EXPECT_THAT(ParseDeltaCsv("n_act,L,K,A,delta\n556e6,2048,4,1,nan\n").status().message(),
              HasSubstr("L=2048 backbone=556M K=4 A=1 (line 2)"));
  EXPECT_THAT(ParseDeltaCsv("n_act,L,K,A,delta\n3e15,2048,4,1,0.1\n").status().message(),
              HasSubstr("no backbone preset"));
}

TEST(CsvTest, SweepColumnNamesTheSweeps) {
  absl::StatusOr<std::vector<Observation>> obs = ParseDeltaCsv(
      "n_act,L,K,A,delta,sweep\n556e6,2048,4,1,-0.02,kxl\n165e6,32768,4,1,-0.03,nact;axk\n"
      "165e6,32768,4,2,-0.04,\n");
  ASSERT_TRUE(obs.ok()) << obs.status();
  EXPECT_EQ((*obs)[0].sweeps, std::vector<SweepRole>{SweepRole::kKxl});
  EXPECT_EQ((*obs)[1].sweeps, (std::vector<SweepRole>{SweepRole::kNact, SweepRole::kAxk}));
  EXPECT_TRUE((*obs)[2].sweeps.empty());
  absl::StatusOr<std::vector<Observation>> back = ParseDeltaCsv(WriteDeltaCsv(*obs));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[1].sweeps, (*obs)[1].sweeps);
  const absl::Status bad =
      ParseDeltaCsv("n_act,L,K,A,delta,sweep\n556e6,2048,4,1,0.1,kxl-64k\n").status();
  EXPECT_THAT(bad.message(), HasSubstr("line 2, column sweep"));
  EXPECT_THAT(bad.message(), HasSubstr("unknown sweep 'kxl-64k'"));
}

// xmod-fit --csv with a sweep column fits by sweep and reports stage 2's offset.
TEST(FitCommandTest, SweepColumnFitsBySweep) {
  SyntheticOptions so;
  so.seed = 9;
  so.sweep_roles = true;
  so.axk_shift = 0.02;
  const std::string path = WriteTemp("roles.csv", WriteDeltaCsv(*PaperSweepObservations(so)));
  FitCommandOptions cmd;
  cmd.csv = path;
  cmd.output = "json";
  cmd.cross_validate = false;
  std::ostringstream json;
  ASSERT_TRUE(RunFitCommand(cmd, json).ok());
  xmod::v1::FitReport report;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.str(), &report).ok());
  EXPECT_TRUE(report.fit().by_sweep());
  EXPECT_EQ(report.n_stage1(), 89);
  EXPECT_EQ(report.n_stage2(), 24);
  EXPECT_NE(report.fit().e_stage2(), 0);
  cmd.output = "table";
  cmd.recommend = {"1e20,32768,556e6"};
  std::ostringstream table;
  ASSERT_TRUE(RunFitCommand(cmd, table).ok());
  EXPECT_THAT(table.str(), HasSubstr("by sweep"));
  EXPECT_THAT(table.str(), HasSubstr(" K_hat(A.3, A=1)="));
  EXPECT_THAT(table.str(), HasSubstr("e_stage2"));
}

// --compare-laws (paper C.1): both candidate laws, their CV errors on the same folds.
TEST(FitCommandTest, CompareLawsPrintsBothLawsOnTheSameFolds) {
  SyntheticOptions so;
  so.seed = 4;
  so.flops = 1e19;  // the exposure term needs each row's C (the CSV's C column)
  const std::string path = WriteTemp("compare.csv", WriteDeltaCsv(*PaperSweepObservations(so)));
  FitCommandOptions opt;
  opt.csv = path;
  opt.generations = 60;
  opt.compare_laws = true;
  std::ostringstream table;
  absl::Status s = RunFitCommand(opt, table);
  ASSERT_TRUE(s.ok()) << s;
  for (const char* line : {"candidate laws on the same grouped folds (paper C.1)", "reduced Eq. 14",
                           "full Eq. 24", "CV RMSE combined", "full law: v "}) {
    EXPECT_THAT(table.str(), HasSubstr(line));
  }
  opt.output = "json";
  std::ostringstream json;
  ASSERT_TRUE(RunFitCommand(opt, json).ok());
  xmod::v1::FitReport report;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.str(), &report).ok());
  const xmod::v1::LawComparison& c = report.law_comparison();
  ASSERT_GT(c.reduced().cv_size(), 0);
  EXPECT_EQ(c.reduced().cv_size(), c.full().cv_size());
  EXPECT_EQ(c.reduced().cv_n(), c.full().cv_n());
  EXPECT_EQ(c.reduced().params().v(), 0);
  EXPECT_EQ(c.reduced_preferred(), !(c.full().cv_rmse() < c.reduced().cv_rmse() * (1 - 1e-9)));

  // Without C the exposure term cannot be computed; the row is named.
  so.flops = 0;
  opt.csv = WriteTemp("no_c.csv", WriteDeltaCsv(*PaperSweepObservations(so)));
  std::ostringstream none;
  EXPECT_THAT(RunFitCommand(opt, none).message(), HasSubstr("needs the run's training FLOPs C"));
  opt.compare_laws = false;
  opt.law = "sparse";
  EXPECT_THAT(RunFitCommand(opt, none).message(), HasSubstr("--law"));
}

TEST(CsvTest, CColumnGivesTheTrainingFlops) {
  absl::StatusOr<std::vector<Observation>> obs =
      ParseDeltaCsv("n_act,L,K,A,delta,C\n556e6,2048,4,1,-0.02,1e19\n556e6,2048,8,1,-0.03,\n");
  ASSERT_TRUE(obs.ok()) << obs.status();
  EXPECT_EQ((*obs)[0].flops, 1e19);
  EXPECT_GT((*obs)[0].point().dense_tokens, 0);
  EXPECT_EQ((*obs)[1].flops, 0);
  absl::StatusOr<std::vector<Observation>> again = ParseDeltaCsv(WriteDeltaCsv(*obs));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0].flops, 1e19);
  EXPECT_EQ((*again)[1].flops, 0);
  absl::Status bad = ParseDeltaCsv("n_act,L,K,A,delta,C\n556e6,2048,4,1,-0.02,0\n").status();
  EXPECT_THAT(bad.message(), HasSubstr("line 2, column C"));
}

TEST(CsvTest, GroupColumnDefinesFolds) {
  absl::StatusOr<std::vector<Observation>> obs =
      ParseDeltaCsv("n_act,L,K,A,delta,group\n556e6,2048,4,1,-0.02,L=2k;ctx\n");
  ASSERT_TRUE(obs.ok()) << obs.status();
  EXPECT_THAT((*obs)[0].groups, ::testing::ElementsAre("L=2k", "ctx"));
}

TEST(FitCommandTest, JsonReportFromCsv) {
  SyntheticOptions so;
  so.seed = 4;
  const std::string path = WriteTemp("paper.csv", WriteDeltaCsv(*PaperSweepObservations(so)));
  FitCommandOptions opt;
  opt.csv = path;
  opt.output = "json";
  opt.seed = 9;
  opt.recommend = {"1e20,2048,556e6", "1e20,32768,556e6"};
  opt.as = {1};
  std::ostringstream out;
  absl::Status s = RunFitCommand(opt, out);
  ASSERT_TRUE(s.ok()) << s;
  // The xmod.v1.FitReport message, printed with proto field names and defaults.
  const std::string json = out.str();
  for (const char* key :
       {"\"params\"", "\"rho_a\"", "\"r2\"", "\"rmse\"", "\"cv\"", "\"L=2048\"", "\"A=0.5\"",
        "\"recommendations\"", "\"candidates\"", "\"study_id\": \"0\""}) {
    EXPECT_THAT(json, HasSubstr(key));
  }
  xmod::v1::FitReport report;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &report).ok());
  ASSERT_EQ(report.recommendations_size(), 2);
  const xmod::v1::Prediction& best = report.recommendations(0).candidates(0);
  EXPECT_EQ(best.point().seq_len(), 2048);
  EXPECT_EQ(best.point().backbone(), "556M");
  EXPECT_EQ(best.point().k(), report.recommendations(0).k());
  // Appendix A.3's closed-form K̂ rides along, and grows with L as the grid's K* does.
  EXPECT_GT(report.recommendations(0).closed_form_k(), 1);
  EXPECT_GT(report.recommendations(1).closed_form_k(),
            2 * report.recommendations(0).closed_form_k());
  EXPECT_EQ(report.seed(), 9u);
  // Same seed, same output (timing aside).
  std::ostringstream again;
  ASSERT_TRUE(RunFitCommand(opt, again).ok());
  xmod::v1::FitReport second;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(again.str(), &second).ok());
  for (xmod::v1::FitReport* r : {&report, &second}) {
    r->clear_fit_seconds();
    r->clear_cv_seconds();
    r->clear_bootstrap_seconds();
  }
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(report, second));
}

TEST(FitCommandTest, BadOptionsAndData) {
  std::ostringstream out;
  FitCommandOptions opt;
  EXPECT_THAT(RunFitCommand(opt, out).message(), HasSubstr("--csv"));
  opt.csv = WriteTemp("few.csv", "n_act,L,K,A,delta\n556e6,2048,4,1,-0.02\n556e6,2048,8,1,-0.03\n");
  absl::Status s = RunFitCommand(opt, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("stage 1 (A = 1 runs)"));
  opt.recommend = {"1e20,2048"};
  EXPECT_THAT(RunFitCommand(opt, out).message(), HasSubstr("--recommend[0]"));
  EXPECT_TRUE(out.str().empty());
}

TEST(FitCommandTest, BinaryExitsNonZeroOnBadInput) {
  const char* bin = std::getenv("XMOD_BIN_DIR");
  if (bin == nullptr) GTEST_SKIP() << "XMOD_BIN_DIR unset (run through ctest)";
  const std::string path = WriteTemp("nan.csv", "n_act,L,K,A,delta\n556e6,2048,4,1,inf\n");
  const std::string cmd =
      std::string(bin) + "/xmod-fit --csv " + path + " 2>" + TempPath("nan.err");
  EXPECT_NE(std::system(cmd.c_str()), 0);
  std::ifstream err(TempPath("nan.err"));
  std::stringstream text;
  text << err.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("L=2048 backbone=556M K=4"));
}

}  // namespace
}  // namespace xmod::fitter
