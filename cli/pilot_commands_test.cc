// xmodctl pilot select against a real in-process coordinator holding a pilot sweep's results
// (finished through the WorkerGateway): the selections and Fig. 4 tables, -o json equal to
// the HTTP /api/sweeps/{id}/pilot document, the figure files (pilot select --figure_dir and
// xmodctl report), and refusals with their exit codes and messages.
#include <httplib.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/app.h"
#include "coordinator/tests/pilot_fixture.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

struct Result {
  int code = 0;
  std::string out, err;
};

class PilotCommandsTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("pilot_cli");
    absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(LoopbackOptions(dir_));
    ASSERT_TRUE(c.ok()) << c.status();
    c_ = *std::move(c);
    xmod::v1::SubmitSweepRequest submit;
    *submit.mutable_spec() = TinyPilotSweep(dir_);
    xmod::v1::SubmitSweepResponse submitted;
    const grpc::Status status = c_.user->SubmitSweep(BearerContext("").get(), submit, &submitted);
    ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
    sweep_ = absl::StrCat(submitted.sweep_id());
    // All but the last run finish, each with its own loss.
    absl::StatusOr<std::vector<int64_t>> finished = FinishRunsWithLoss(
        *c_.worker, 9, [](int64_t id) { return 3.0 + 0.01 * static_cast<double>(id % 5); });
    ASSERT_TRUE(finished.ok()) << finished.status();
  }

  Result Xmodctl(std::vector<std::string> args) {
    args.insert(args.begin(),
                {"xmodctl", "--addr", absl::StrCat("127.0.0.1:", c_.coordinator->ports().grpc)});
    std::ostringstream out, err;
    Result r;
    r.code = cli::RunXmodctl(args, cli::Io{&out, &err});
    r.out = out.str();
    r.err = err.str();
    return r;
  }

  httplib::Result Http(const std::string& path) {
    httplib::Client http("127.0.0.1", c_.coordinator->ports().http);
    return http.Get(path.c_str());
  }

  std::string dir_;
  std::string sweep_;
  LoopbackCoordinator c_;
};

TEST_F(PilotCommandsTest, PrintsTheSelectionsAndTheFigure4Table) {
  const Result r = Xmodctl({"pilot", "select", sweep_});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("X-MoD pick per MoE of pilot sweep " + sweep_));
  EXPECT_THAT(r.out, HasSubstr("MOE"));
  EXPECT_THAT(r.out, HasSubstr("PICK_LOSS"));
  EXPECT_THAT(r.out, HasSubstr("MoE 2:4"));
  EXPECT_THAT(r.out, HasSubstr("MoE 2:8"));
  EXPECT_THAT(r.out, HasSubstr("Configurations (Fig. 4)"));
  EXPECT_THAT(r.out, HasSubstr("pending"));  // the run still queued
  EXPECT_THAT(r.out, HasSubstr("1/2"));      // its configuration: one seed of two succeeded
  EXPECT_THAT(r.out, HasSubstr("baseline"));

  const Result csv = Xmodctl({"-o", "csv", "pilot", "select", sweep_});
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_THAT(csv.out, HasSubstr("moe,k,n,loss,baseline,pick,pick_n,pick_loss,note"));
  EXPECT_THAT(csv.out, HasSubstr("backbone,l,c,k,config,n,loss,seeds,status,selected"));
}

TEST_F(PilotCommandsTest, JsonIsTheHttpDocument) {
  const Result cli = Xmodctl({"-o", "json", "pilot", "select", sweep_});
  ASSERT_EQ(cli.code, 0) << cli.err;
  httplib::Result http = Http(absl::StrCat("/api/sweeps/", sweep_, "/pilot"));
  ASSERT_TRUE(http);
  ASSERT_EQ(http->status, 200) << http->body;
  google::protobuf::Value a, b;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(cli.out, &a).ok()) << cli.out;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(http->body, &b).ok()) << http->body;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a, b)) << cli.out << "\n"
                                                                        << http->body;
  EXPECT_THAT(cli.out, HasSubstr("\"status\": \"PILOT_PENDING\""));
  EXPECT_THAT(cli.out, HasSubstr("\"within_budget\""));
}

TEST_F(PilotCommandsTest, WritesTheFigure) {
  const std::string figures = dir_ + "/figures";
  const Result r = Xmodctl({"pilot", "select", sweep_, "--figure_dir", figures});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote " + figures + "/pilot_selection.png"));
  EXPECT_THAT(r.out, HasSubstr("wrote " + figures + "/pilot_selection.svg"));
  EXPECT_GT(std::filesystem::file_size(figures + "/pilot_selection.png"), 0u);
  EXPECT_GT(std::filesystem::file_size(figures + "/pilot_selection.svg"), 0u);
}

// A pilot sweep cannot be fitted (no dense reference here, too few rows in the paper's):
// `xmodctl report` draws its Fig. 4 and says why the fit's figures are missing.
TEST_F(PilotCommandsTest, ReportOfAPilotDrawsItsFigure) {
  const std::string out = dir_ + "/report";
  const Result r = Xmodctl({"report", sweep_, "--output", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote " + out + "/pilot_selection.png"));
  EXPECT_THAT(r.out, HasSubstr("wrote " + out + "/pilot_selection.svg"));
  EXPECT_THAT(r.out, HasSubstr("skipped report.md and the fit's figures: "));
  EXPECT_TRUE(std::filesystem::exists(out + "/pilot_selection.png"));
  EXPECT_FALSE(std::filesystem::exists(out + "/report.md"));
}

TEST_F(PilotCommandsTest, RefusalsNameWhatIsWrong) {
  Result r = Xmodctl({"pilot", "select", "99"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("sweep 99 not found"));
  r = Xmodctl({"pilot", "select", "0"});
  EXPECT_EQ(r.code, 2);  // INVALID_ARGUMENT
  EXPECT_THAT(r.err, HasSubstr("sweep_id: "));
  r = Xmodctl({"pilot", "select"});
  EXPECT_EQ(r.code, 2);
  httplib::Result http = Http("/api/sweeps/99/pilot");
  ASSERT_TRUE(http);
  EXPECT_EQ(http->status, 404);
  EXPECT_THAT(http->body, HasSubstr("sweep 99 not found"));
}

}  // namespace
}  // namespace xmod
