// Tests of `xmodctl report` against an in-process fake Coordinator whose GetFit serves a
// hand-made fit of an A = 1 context sweep (sweep 2, study "paper") or no fit (sweep 1): the
// files written and the figures skipped are printed; no fit, an unwritable --output and a
// sweep id given together with --study are errors with the documented exit codes.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "cli/app.h"
#include "common/files.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod::cli {
namespace {

using ::testing::HasSubstr;

xmod::v1::Fit ContextSweepFit() {
  xmod::v1::Fit fit;
  fit.set_id(9);
  fit.set_sweep_id(2);
  fit.set_r2(0.98);
  fit.set_n_obs(6);
  fit.mutable_params()->set_e(0.018);
  fit.mutable_params()->set_u(0.94);
  fit.mutable_params()->set_eta_n(0.078);
  fit.mutable_params()->set_rho_n(1.2);
  fit.mutable_params()->set_w(105);
  fit.mutable_params()->set_eta_l(0.93);
  fit.mutable_params()->set_rho_l(0.48);
  int64_t id = 1;
  for (int l : {2048, 4096}) {
    for (int k : {2, 4, 8}) {
      xmod::v1::FitObservation* o = fit.add_observations();
      o->set_run_id(id++);
      o->set_name(absl::StrCat("xmod-556M-L", l, "-K", k, "-A1"));
      o->set_backbone("556M");
      o->set_n_act(556e6);
      o->set_seq_len(l);
      o->set_k(k);
      o->set_a(1);
      o->set_n0(4);
      o->set_capacity_ratio(1 + 0.1 * k);
      o->set_delta(-0.01 * k + l / 1e5);
      o->set_fitted_delta(o->delta() + 0.001);
    }
  }
  return fit;
}

class FakeCoordinator final : public xmod::v1::Coordinator::Service {
 public:
  grpc::Status GetFit(grpc::ServerContext*, const xmod::v1::GetFitRequest* request,
                      xmod::v1::Fit* response) override {
    if (request->sweep_id() == 2 || request->study() == "paper") {
      *response = ContextSweepFit();
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("no fit yet for sweep ", request->sweep_id()));
  }
};

class ReportCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    addr_ = absl::StrCat("127.0.0.1:", port);
    std::string pattern = ::testing::TempDir() + "/report_command_test.XXXXXX";
    dir_ = mkdtemp(pattern.data());
  }
  void TearDown() override { server_->Shutdown(); }

  struct Result {
    int code;
    std::string out, err;
  };
  Result Xmodctl(std::vector<std::string> args) {
    args.insert(args.begin(), {"xmodctl", "--addr", addr_});
    std::ostringstream out, err;
    const int code = RunXmodctl(args, Io{&out, &err});
    return {code, out.str(), err.str()};
  }

  FakeCoordinator fake_;
  std::unique_ptr<grpc::Server> server_;
  std::string addr_;
  std::string dir_;
};

TEST_F(ReportCommandTest, WritesTheFiguresItHasRunsFor) {
  const std::string out = dir_ + "/sweep2";
  Result r = Xmodctl({"report", "2", "--output", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("wrote ", out, "/delta_vs_k.png\n")));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("wrote ", out, "/delta_vs_k.svg\n")));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("wrote ", out, "/report.md\n")));
  EXPECT_THAT(r.out, HasSubstr("skipped delta_vs_a: no run with A ≠ 1"));
  EXPECT_THAT(r.out, HasSubstr("skipped predicted_vs_measured:"));
  EXPECT_TRUE(std::filesystem::exists(out + "/delta_vs_k.png"));
  EXPECT_FALSE(std::filesystem::exists(out + "/delta_vs_a.png"));
}

TEST_F(ReportCommandTest, TakesAStudyAndTheGlobalOutputFormat) {
  Result r = Xmodctl({"-o", "json", "report", "--study", "paper", "--output", dir_ + "/s"});
  ASSERT_EQ(r.code, 0) << r.err;
  absl::StatusOr<std::string> md = ReadFile(dir_ + "/s/report.md");
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_THAT(*md, HasSubstr("# Scaling-law fit of study paper"));
}

TEST_F(ReportCommandTest, NoFitYetFails) {
  Result r = Xmodctl({"report", "1", "--output", dir_ + "/none"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("no fit yet for sweep 1"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/none"));
}

TEST_F(ReportCommandTest, UnwritableOutputIsNamed) {
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/file", "x").ok());
  Result r = Xmodctl({"report", "2", "--output", dir_ + "/file/out"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("--output ", dir_, "/file/out: ")));
}

TEST_F(ReportCommandTest, SweepAndStudyTogetherIsBadUsage) {
  Result r = Xmodctl({"report", "2", "--study", "paper", "--output", dir_});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--study"));
  r = Xmodctl({"report", "2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--output"));
}

}  // namespace
}  // namespace xmod::cli
