// One API shape everywhere (docs/architecture.md, "API shape"): against one real in-process
// coordinator, `xmodctl -o json` and the HTTP /api/ print the same document for the same
// sweeps, runs, metrics, fit and study — compared as JSON values (google.protobuf.Value),
// so whitespace and key order do not matter but every field and default does.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <httplib.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/app.h"
#include "coordinator/coordinator.h"
#include "coordinator/store/store_writes.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

google::protobuf::Value ParseJson(const std::string& json) {
  google::protobuf::Value value;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &value);
  EXPECT_TRUE(status.ok()) << status.ToString() << " in " << json;
  return value;
}

class ApiShapeTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("api_shape");
    CoordinatorOptions options = LoopbackOptions(dir_);
    options.metrics_listen = "127.0.0.1:0";
    options.dashboard_dir = dir_;
    absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = *std::move(c);
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", coordinator_->ports().grpc),
                                       grpc::InsecureChannelCredentials());
    user_ = xmod::v1::Coordinator::NewStub(channel);
    worker_ = xmod::v1::WorkerGateway::NewStub(channel);
  }

  // xmodctl -o json ARGS...: its standard output (the command must succeed).
  std::string Xmodctl(std::vector<std::string> args) {
    args.insert(args.begin(),
                {"xmodctl", "--addr", absl::StrCat("127.0.0.1:", coordinator_->ports().grpc), "-o",
                 "json"});
    std::ostringstream out, err;
    EXPECT_EQ(cli::RunXmodctl(args, cli::Io{&out, &err}), 0) << err.str();
    return out.str();
  }

  // GET PATH on the HTTP API: its body (the request must succeed).
  std::string Http(const std::string& path) {
    httplib::Client http("127.0.0.1", coordinator_->ports().http);
    auto res = http.Get(path.c_str());
    EXPECT_TRUE(res);
    if (!res) return "";
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
    return res->body;
  }

  void ExpectSameDocument(const std::string& cli, const std::string& http) {
    google::protobuf::util::MessageDifferencer differencer;
    std::string diff;
    differencer.ReportDifferencesToString(&diff);
    EXPECT_TRUE(differencer.Compare(ParseJson(cli), ParseJson(http)))
        << diff << "\nxmodctl: " << cli << "\nHTTP: " << http;
  }

  std::string dir_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<xmod::v1::Coordinator::Stub> user_;
  std::unique_ptr<xmod::v1::WorkerGateway::Stub> worker_;
};

TEST_F(ApiShapeTest, CliAndHttpPrintTheSameDocuments) {
  grpc::ClientContext submit_context;
  xmod::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = TinySweep(dir_);
  xmod::v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(user_->SubmitSweep(&submit_context, submit, &submitted).ok());
  const int64_t sweep_id = submitted.sweep_id();

  // One run leased and reporting metrics, so runs carry progress, a worker and series.
  grpc::ClientContext register_context;
  xmod::v1::RegisterRequest reg;
  reg.set_worker_name("w1");
  reg.add_slots()->set_index(0);
  xmod::v1::RegisterResponse registered;
  ASSERT_TRUE(worker_->Register(&register_context, reg, &registered).ok());
  grpc::ClientContext acquire_context;
  xmod::v1::AcquireRunRequest acquire;
  acquire.set_worker_id(registered.worker_id());
  acquire.add_free_slots(0);
  acquire.set_wait_ms(5000);
  xmod::v1::AcquireRunResponse assignment;
  ASSERT_TRUE(worker_->AcquireRun(&acquire_context, acquire, &assignment).ok());
  ASSERT_TRUE(assignment.has_assignment());
  const int64_t run_id = assignment.assignment().run_id();
  grpc::ClientContext report_context;
  xmod::v1::ReportMetricsRequest metrics;
  metrics.set_worker_id(registered.worker_id());
  metrics.set_run_id(run_id);
  metrics.set_attempt(1);
  for (int step = 1; step <= 3; ++step) {
    xmod::v1::MetricPoint* p = metrics.add_points();
    p->set_name(step == 3 ? "val/loss" : "train/loss");
    p->set_step(step);
    p->set_tokens(step * 128);
    p->set_flops(step * 1e9);
    p->set_value(6 - step * 0.5);
  }
  xmod::v1::ReportMetricsResponse ack;
  ASSERT_TRUE(worker_->ReportMetrics(&report_context, metrics, &ack).ok());

  // A stored fit of the sweep (defaults such as study_id 0 must print on both sides).
  xmod::v1::Fit fit;
  fit.set_sweep_id(sweep_id);
  fit.set_created_unix_ms(1700000000000);
  fit.mutable_params()->set_e(0.1);
  fit.mutable_params()->set_rho_k(1.25);
  fit.set_r2(0.97);
  fit.set_n_obs(9);
  fit.add_at_bound("eta_l");
  xmod::v1::GroupError* cv = fit.add_cv();
  cv->set_group("L=64");
  cv->set_rmse(0.004);
  cv->set_n(3);
  ASSERT_TRUE(coordinator_->store()
                  ->WriteAndWait([&](Db& db) { return InsertFit(db, fit).status(); })
                  .ok());

  // A study over the sweep.
  grpc::ClientContext study_context;
  xmod::v1::CreateStudyRequest create;
  create.mutable_spec()->set_name("shape");
  xmod::v1::StudyMember* member = create.mutable_spec()->add_members();
  member->set_sweep_id(sweep_id);
  member->set_role("kxl");
  xmod::v1::Study study;
  ASSERT_TRUE(user_->CreateStudy(&study_context, create, &study).ok());

  const std::string sweep = absl::StrCat(sweep_id);
  const std::string run = absl::StrCat(run_id);
  ExpectSameDocument(Xmodctl({"sweep", "list"}), Http("/api/sweeps"));
  ExpectSameDocument(Xmodctl({"runs", "list", "--sweep", sweep}),
                     Http(absl::StrCat("/api/sweeps/", sweep, "/runs")));
  // Defaults agree: neither side names max_points (the coordinator's default, 500).
  ExpectSameDocument(Xmodctl({"metrics", run}), Http(absl::StrCat("/api/runs/", run, "/metrics")));
  ExpectSameDocument(Xmodctl({"fit", "show", sweep}),
                     Http(absl::StrCat("/api/sweeps/", sweep, "/fit")));
  ExpectSameDocument(Xmodctl({"study", "list"}), Http("/api/studies"));
  ExpectSameDocument(Xmodctl({"study", "show", "shape"}), Http("/api/studies/shape"));

  // Proto field names and defaults, as the Python client's MessageToDict prints them.
  const std::string runs = Http(absl::StrCat("/api/sweeps/", sweep, "/runs"));
  EXPECT_THAT(runs, ::testing::HasSubstr("\"forward_flops_per_token\""));
  EXPECT_THAT(runs, ::testing::Not(::testing::HasSubstr("forwardFlopsPerToken")));
  EXPECT_THAT(Xmodctl({"fit", "show", sweep}), ::testing::HasSubstr("\"study_id\": \"0\""));
}

// One listing query two ways (xmodctl runs list's flags, sent as a gRPC ListRunsRequest, and
// the HTTP route's parameters): the same page contents and next page token, page after page.
TEST_F(ApiShapeTest, CliAndHttpPageTheSameWay) {
  grpc::ClientContext submit_context;
  xmod::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = TinySweep(dir_);
  for (uint64_t seed : {5, 6, 7, 8}) submit.mutable_spec()->mutable_grids(0)->add_seeds(seed);
  xmod::v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(user_->SubmitSweep(&submit_context, submit, &submitted).ok());
  const std::string sweep = absl::StrCat(submitted.sweep_id());

  struct Query {
    std::vector<std::string> flags;
    std::string params;
  };
  for (const Query& query : std::vector<Query>{
           {{"--arch", "xmod", "--sort", "name", "--desc"}, "arch=xmod&sort=name&order=desc"},
           {{"--K", "1,4", "--sort", "k"}, "k=1,4&sort=k"},
           {{"--group", "replicates", "--sort", "k"}, "group=replicates&sort=k"},
           {{"--name", "-s6"}, "name=-s6"},
       }) {
    std::string token;
    for (int page = 0; page < 20; ++page) {
      std::vector<std::string> args = {"runs", "list", "--sweep", sweep, "--page_size", "2"};
      args.insert(args.end(), query.flags.begin(), query.flags.end());
      std::string path = absl::StrCat("/api/sweeps/", sweep, "/runs?page_size=2&", query.params);
      if (!token.empty()) {
        args.insert(args.end(), {"--page_token", token});
        absl::StrAppend(&path, "&page_token=", token);  // base64url: nothing to escape
      }
      const std::string cli = Xmodctl(args);
      ExpectSameDocument(cli, Http(path));
      google::protobuf::Value document = ParseJson(cli);
      const auto& fields = document.struct_value().fields();
      ASSERT_TRUE(fields.contains("next_page_token")) << cli;
      const auto& entries = fields.at(query.params.find("group") == 0 ? "groups" : "runs");
      EXPECT_LE(entries.list_value().values_size(), 2) << cli;
      token = fields.at("next_page_token").string_value();
      if (token.empty()) break;
      ASSERT_LT(page, 19) << "the pages never end: " << query.params;
    }
  }
}

}  // namespace
}  // namespace xmod
