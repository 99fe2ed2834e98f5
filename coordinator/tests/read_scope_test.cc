// The read scope is exact, through real gRPC and HTTP clients of an in-process coordinator:
// every call a `read` credential may make changes no row of any table (the event log aside);
// request fields that size work are refused past their caps naming the field, over gRPC and
// HTTP alike; dry-run data globs stay inside --data_root and tell nothing about files
// elsewhere; the adaptive controller goes on from its own decisions, never a user's proposal;
// a decision fitting one sweep holds up no other sweep's decisions; proposal fits are capped
// per credential and in all, and stop when their caller goes away or the coordinator shuts
// down.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/poll.h"
#include "coordinator/coordinator.h"
#include "coordinator/fitting/fit_trigger.h"
#include "coordinator/store/design_store.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kUser[] = "alice-secret-0123456789";
constexpr char kReader[] = "viewer-secret-0123456789";
constexpr char kAuditor[] = "auditor-secret-0123456789";
constexpr char kWorker[] = "w1-secret-0123456789abcdef";

// Every row of every table but the event log.
std::map<std::string, std::string> TableDumps(Store& store) {
  return TableRows(store, /*with_events=*/false);
}

class ReadScopeTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("scope");
    data_ = dir_ + "/data";
    std::filesystem::create_directories(data_);
  }

  void Start(AdaptiveControllerOptions adaptive = {}) {
    CoordinatorOptions options = LoopbackOptions(dir_);
    options.tick_ms = 3'600'000;  // nothing changes behind the test's back; it polls itself
    options.data_roots = {data_};
    options.adaptive = std::move(adaptive);
    absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(
        options, absl::StrCat("user alice ", kUser, "\nread viewer ", kReader, "\nread auditor ",
                              kAuditor, "\nworker w1 ", kWorker));
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(c->coordinator);
    stub_ = std::move(c->user);
    worker_ = std::move(c->worker);
  }

  static std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
    auto context = std::make_unique<grpc::ClientContext>();
    AttachBearerToken(token, context.get());
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return context;
  }

  // Submits `spec` with the user credential; its id.
  int64_t Submit(const xmod::v1::SweepSpec& spec) {
    xmod::v1::SubmitSweepRequest request;
    *request.mutable_spec() = spec;
    xmod::v1::SubmitSweepResponse response;
    grpc::Status status = stub_->SubmitSweep(As(kUser).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.sweep_id();
  }

  // The sweep's stored decisions, newest first.
  std::vector<xmod::v1::DesignDecision> Decisions(int64_t sweep_id) {
    xmod::v1::ListDecisionsRequest request;
    request.set_sweep_id(sweep_id);
    xmod::v1::ListDecisionsResponse response;
    EXPECT_TRUE(stub_->ListDecisions(As(kReader).get(), request, &response).ok());
    return {response.decisions().begin(), response.decisions().end()};
  }

  // The worker leases one run, reports val/loss and finishes it successfully; its id.
  int64_t RunOneToSuccess() {
    xmod::v1::RegisterResponse registered;
    xmod::v1::RegisterRequest reg = CpuWorker("w1", 1);
    EXPECT_TRUE(worker_->Register(As(kWorker).get(), reg, &registered).ok());
    xmod::v1::AcquireRunRequest acquire;
    acquire.set_worker_id(registered.worker_id());
    acquire.add_free_slots(0);
    acquire.set_wait_ms(5000);
    xmod::v1::AcquireRunResponse assignment;
    EXPECT_TRUE(worker_->AcquireRun(As(kWorker).get(), acquire, &assignment).ok());
    const int64_t run_id = assignment.assignment().run_id();
    xmod::v1::ReportMetricsRequest metrics;
    metrics.set_worker_id(registered.worker_id());
    metrics.set_run_id(run_id);
    metrics.set_attempt(1);
    for (int step = 1; step <= 3; ++step) {
      xmod::v1::MetricPoint* p = metrics.add_points();
      p->set_step(step);
      p->set_tokens(step * 512);
      p->set_flops(step * 1e11);
      p->set_name("val/loss");
      p->set_value(5.0 - step * 0.1);
    }
    xmod::v1::ReportMetricsResponse ack;
    EXPECT_TRUE(worker_->ReportMetrics(As(kWorker).get(), metrics, &ack).ok());
    xmod::v1::FinishRunRequest finish;
    finish.set_worker_id(registered.worker_id());
    finish.set_run_id(run_id);
    finish.set_attempt(1);
    finish.set_outcome(xmod::v1::OUTCOME_SUCCEEDED);
    xmod::v1::FinishRunResponse finished;
    EXPECT_TRUE(worker_->FinishRun(As(kWorker).get(), finish, &finished).ok());
    return run_id;
  }

  std::string dir_;
  std::string data_;  // the coordinator's only data root
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<xmod::v1::Coordinator::Stub> stub_;
  std::unique_ptr<xmod::v1::WorkerGateway::Stub> worker_;
};

TEST_F(ReadScopeTest, EveryReadCallChangesNoRow) {
  Start();
  // A database with an adaptive sweep (its seed set queued, the controller's decisions), a
  // succeeded run with metrics, and a study.
  const xmod::v1::SweepSpec spec = AdaptiveTinySweep(data_);
  const int64_t sweep = Submit(spec);
  ASSERT_GT(sweep, 0);
  coordinator_->adaptive()->WaitIdle();
  const int64_t run_id = RunOneToSuccess();
  coordinator_->adaptive()->WaitIdle();
  ASSERT_FALSE(Decisions(sweep).empty());
  xmod::v1::CreateStudyRequest create;
  create.mutable_spec()->set_name("scoped");
  xmod::v1::StudyMember* member = create.mutable_spec()->add_members();
  member->set_sweep_id(sweep);
  member->set_role("kxl");
  xmod::v1::Study study;
  ASSERT_TRUE(stub_->CreateStudy(As(kUser).get(), create, &study).ok());
  coordinator_->fit_trigger()->WaitIdle();

  std::map<std::string, std::string> before = TableDumps(*coordinator_->store());
  ASSERT_FALSE(before["runs"].empty());
  ASSERT_FALSE(before["metrics"].empty());
  ASSERT_FALSE(before["design_decisions"].empty());
  // Each read-scope call, by name, and its status (OK or a refusal of what the state lacks).
  const auto expect_unchanged = [&](const std::string& call, const grpc::Status& status) {
    EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << call;
    EXPECT_EQ(TableDumps(*coordinator_->store()), before) << call << " changed the database";
  };
  const auto reader = [] { return As(kReader); };

  xmod::v1::GetSweepRequest get_sweep;
  get_sweep.set_sweep_id(sweep);
  xmod::v1::Sweep got_sweep;
  grpc::Status status = stub_->GetSweep(reader().get(), get_sweep, &got_sweep);
  EXPECT_TRUE(status.ok());
  expect_unchanged("GetSweep", status);

  xmod::v1::ListSweepsResponse sweeps;
  status = stub_->ListSweeps(reader().get(), {}, &sweeps);
  EXPECT_TRUE(status.ok());
  expect_unchanged("ListSweeps", status);

  xmod::v1::ListRunsRequest list_runs;
  list_runs.set_sweep_id(sweep);
  xmod::v1::ListRunsResponse runs;
  status = stub_->ListRuns(reader().get(), list_runs, &runs);
  EXPECT_TRUE(status.ok());
  expect_unchanged("ListRuns", status);

  xmod::v1::GetRunRequest get_run;
  get_run.set_run_id(run_id);
  xmod::v1::GetRunResponse run;
  status = stub_->GetRun(reader().get(), get_run, &run);
  EXPECT_TRUE(status.ok());
  expect_unchanged("GetRun", status);

  {
    auto context = reader();
    xmod::v1::WatchSweepRequest watch;
    watch.set_sweep_id(sweep);
    auto stream = stub_->WatchSweep(context.get(), watch);
    xmod::v1::WatchSweepEvent event;
    EXPECT_TRUE(stream->Read(&event));
    EXPECT_TRUE(event.snapshot());
    context->TryCancel();
    while (stream->Read(&event)) {
    }
    stream->Finish();
    expect_unchanged("WatchSweep", grpc::Status::OK);
  }

  xmod::v1::GetMetricsRequest get_metrics;
  get_metrics.set_run_id(run_id);
  xmod::v1::GetMetricsResponse series;
  status = stub_->GetMetrics(reader().get(), get_metrics, &series);
  EXPECT_TRUE(status.ok());
  EXPECT_FALSE(series.series().empty());
  expect_unchanged("GetMetrics", status);

  xmod::v1::QueryRequest query;
  query.set_sql("SELECT COUNT(*) FROM runs");
  xmod::v1::QueryResponse rows;
  status = stub_->Query(reader().get(), query, &rows);
  EXPECT_TRUE(status.ok());
  expect_unchanged("Query", status);

  xmod::v1::GetFitRequest get_fit;
  get_fit.set_sweep_id(sweep);
  xmod::v1::Fit fit;
  expect_unchanged("GetFit", stub_->GetFit(reader().get(), get_fit, &fit));

  xmod::v1::PredictRequest predict;
  predict.set_sweep_id(sweep);
  xmod::v1::LawPoint* point = predict.add_points();
  point->set_flops(1e12);
  point->set_seq_len(64);
  point->set_backbone("tiny-test");
  point->set_k(2);
  xmod::v1::PredictResponse predicted;
  expect_unchanged("Predict", stub_->Predict(reader().get(), predict, &predicted));

  xmod::v1::RecommendRequest recommend;
  recommend.set_sweep_id(sweep);
  recommend.set_flops(1e12);
  recommend.set_seq_len(64);
  recommend.set_backbone("tiny-test");
  xmod::v1::RecommendResponse recommended;
  expect_unchanged("Recommend", stub_->Recommend(reader().get(), recommend, &recommended));

  xmod::v1::PlanRequest plan;
  *plan.mutable_model() = spec.grids(0).base();
  plan.mutable_model()->set_arch(xmod::v1::XMOD);
  plan.mutable_model()->mutable_backbone()->set_name("tiny-test");
  plan.mutable_model()->set_k(2);
  plan.mutable_model()->set_a(1);
  plan.set_seq_len(64);
  xmod::v1::PlanResponse planned;
  status = stub_->Plan(reader().get(), plan, &planned);
  EXPECT_TRUE(status.ok()) << status.error_message();
  expect_unchanged("Plan", status);

  xmod::v1::GetStudyRequest get_study;
  get_study.set_name("scoped");
  status = stub_->GetStudy(reader().get(), get_study, &study);
  EXPECT_TRUE(status.ok());
  expect_unchanged("GetStudy", status);

  xmod::v1::ListStudiesResponse studies;
  status = stub_->ListStudies(reader().get(), {}, &studies);
  EXPECT_TRUE(status.ok());
  expect_unchanged("ListStudies", status);

  xmod::v1::ListDecisionsRequest list_decisions;
  list_decisions.set_sweep_id(sweep);
  xmod::v1::ListDecisionsResponse decisions;
  status = stub_->ListDecisions(reader().get(), list_decisions, &decisions);
  EXPECT_TRUE(status.ok());
  expect_unchanged("ListDecisions", status);

  // A proposal without submit is computed and answered, and stored nowhere.
  xmod::v1::ProposeRunsRequest propose;
  propose.set_sweep_id(sweep);
  propose.set_count(3);
  xmod::v1::DesignDecision proposal;
  status = stub_->ProposeRuns(reader().get(), propose, &proposal);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(proposal.id(), 0);
  EXPECT_EQ(proposal.source(), "propose");
  for (const xmod::v1::Proposal& p : proposal.proposals()) EXPECT_EQ(p.run_id(), 0);
  expect_unchanged("ProposeRuns", status);

  xmod::v1::SubmitSweepRequest dry_run;
  *dry_run.mutable_spec() = spec;
  dry_run.set_dry_run(true);
  xmod::v1::SubmitSweepResponse expanded;
  status = stub_->SubmitSweep(reader().get(), dry_run, &expanded);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(expanded.sweep_id(), 0);
  EXPECT_FALSE(expanded.runs().empty());
  expect_unchanged("SubmitSweep with dry_run", status);

  // The controller goes on from its own last decision: nothing is due, nothing decided.
  const size_t decided = Decisions(sweep).size();
  coordinator_->adaptive()->WaitIdle();
  EXPECT_EQ(Decisions(sweep).size(), decided);
  expect_unchanged("the controller's next poll", grpc::Status::OK);
}

TEST_F(ReadScopeTest, TheControllerGoesOnFromItsOwnDecisionsOnly) {
  Start();
  const xmod::v1::SweepSpec spec = AdaptiveTinySweep(data_);
  const int64_t sweep = Submit(spec);
  coordinator_->adaptive()->WaitIdle();
  // The design has stopped (as a finished design's last decision says) ...
  xmod::v1::DesignDecision stop = Decisions(sweep).front();
  stop.set_stop(true);
  stop.set_stop_reason("every target's expected regret is below the tolerance");
  ASSERT_TRUE(coordinator_->store()
                  ->WriteAndWait([&](Db& db) { return InsertDecision(db, &stop).status(); })
                  .ok());
  // ... and then a user submits a proposal by hand, which is stored after it.
  xmod::v1::ProposeRunsRequest propose;
  propose.set_sweep_id(sweep);
  propose.set_count(1);
  propose.set_submit(true);
  xmod::v1::DesignDecision submitted;
  grpc::Status status = stub_->ProposeRuns(As(kUser).get(), propose, &submitted);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(Decisions(sweep).front().id(), submitted.id());

  // After a restart the controller still knows its design stopped: it decides nothing more.
  coordinator_->Shutdown();
  coordinator_.reset();
  Start();
  coordinator_->adaptive()->WaitIdle();
  const std::vector<xmod::v1::DesignDecision> decisions = Decisions(sweep);
  ASSERT_FALSE(decisions.empty());
  EXPECT_EQ(decisions.front().id(), submitted.id());
}

TEST_F(ReadScopeTest, FieldsThatSizeWorkAreRefusedPastTheirCaps) {
  Start();
  const xmod::v1::SweepSpec spec = AdaptiveTinySweep(data_);
  const int64_t sweep = Submit(spec);
  coordinator_->adaptive()->WaitIdle();
  const std::map<std::string, std::string> before = TableDumps(*coordinator_->store());
  const auto refused = [](const grpc::Status& status, const std::string& message) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << message;
    EXPECT_EQ(status.error_message(), message);
  };

  xmod::v1::ProposeRunsRequest propose;
  propose.set_sweep_id(sweep);
  propose.set_bootstrap_samples(20000);
  xmod::v1::DesignDecision decision;
  refused(stub_->ProposeRuns(As(kReader).get(), propose, &decision),
          "bootstrap_samples: 20000 exceeds the limit 1000");
  propose.set_bootstrap_samples(0);
  propose.set_count(500);
  refused(stub_->ProposeRuns(As(kReader).get(), propose, &decision),
          "count: 500 exceeds the limit 100");
  propose.set_count(0);
  for (int i = 0; i < 101; ++i) *propose.add_targets() = spec.adaptive().targets(0);
  refused(stub_->ProposeRuns(As(kReader).get(), propose, &decision),
          "targets: 101 exceeds the limit 100");

  xmod::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = spec;
  submit.mutable_spec()->mutable_adaptive()->set_bootstrap_samples(20000);
  submit.set_dry_run(true);
  xmod::v1::SubmitSweepResponse submitted;
  refused(stub_->SubmitSweep(As(kReader).get(), submit, &submitted),
          "adaptive.bootstrap_samples: 20000 exceeds the limit 1000");
  submit.set_dry_run(false);
  refused(stub_->SubmitSweep(As(kUser).get(), submit, &submitted),
          "adaptive.bootstrap_samples: 20000 exceeds the limit 1000");

  xmod::v1::GetMetricsRequest metrics;
  metrics.set_run_id(1);
  metrics.set_max_points(200000);
  xmod::v1::GetMetricsResponse series;
  refused(stub_->GetMetrics(As(kReader).get(), metrics, &series),
          "max_points: 200000 exceeds the limit 100000");
  metrics.set_max_points(0);
  for (int i = 0; i < 257; ++i) metrics.add_names(absl::StrCat("m", i));
  refused(stub_->GetMetrics(As(kReader).get(), metrics, &series),
          "names: 257 exceeds the limit 256");
  xmod::v1::QueryRequest query;
  query.set_sql("SELECT 1");
  query.set_max_rows(20000);
  xmod::v1::QueryResponse rows;
  refused(stub_->Query(As(kReader).get(), query, &rows), "max_rows: 20000 exceeds the limit 10000");
  xmod::v1::ListDecisionsRequest decisions;
  decisions.set_sweep_id(sweep);
  decisions.set_limit(5000);
  xmod::v1::ListDecisionsResponse listed;
  refused(stub_->ListDecisions(As(kReader).get(), decisions, &listed),
          "limit: 5000 exceeds the limit 1000");
  xmod::v1::ListRunsRequest runs;
  runs.set_limit(-1);
  xmod::v1::ListRunsResponse run_list;
  refused(stub_->ListRuns(As(kReader).get(), runs, &run_list), "limit: must be >= 0 (0 = all)");
  runs.set_limit(0);
  for (int i = 0; i < 7; ++i) runs.add_states(xmod::v1::QUEUED);
  refused(stub_->ListRuns(As(kReader).get(), runs, &run_list), "states: 7 exceeds the limit 6");
  xmod::v1::PredictRequest predict;
  predict.set_sweep_id(sweep);
  for (int i = 0; i < 10001; ++i) predict.add_points()->set_flops(1e12);
  xmod::v1::PredictResponse predicted;
  refused(stub_->Predict(As(kReader).get(), predict, &predicted),
          "points: 10001 exceeds the limit 10000");
  xmod::v1::RecommendRequest recommend;
  recommend.set_sweep_id(sweep);
  for (int i = 0; i < 101; ++i) recommend.add_ks(i + 1);
  xmod::v1::RecommendResponse recommended;
  refused(stub_->Recommend(As(kReader).get(), recommend, &recommended),
          "ks: 101 exceeds the limit 100");
  xmod::v1::PlanRequest plan;
  plan.mutable_model()->set_arch(xmod::v1::DENSE);
  plan.mutable_model()->mutable_backbone()->set_name("tiny-test");
  plan.mutable_model()->mutable_backbone()->set_n_layers(2000000000);
  plan.set_seq_len(64);
  xmod::v1::PlanResponse planned;
  refused(stub_->Plan(As(kReader).get(), plan, &planned),
          "model.backbone.n_layers: 2000000000 exceeds the limit 4096");

  // The HTTP API holds its query parameters to the same caps, with the same messages.
  httplib::Client http("127.0.0.1", coordinator_->ports().http);
  const httplib::Headers reader = {{"Authorization", absl::StrCat("Bearer ", kReader)}};
  const auto http_refused = [&](const std::string& path, const std::string& message) {
    httplib::Result res = http.Get(path, reader);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 400) << path;
    EXPECT_EQ(res->body, absl::StrCat("{\"error\":\"", message, "\"}")) << path;
  };
  std::vector<int> many(101);
  for (int i = 0; i < 101; ++i) many[i] = i + 1;
  const std::string recommend_path =
      absl::StrCat("/api/sweeps/", sweep, "/recommend?flops=1e18&seq_len=256&backbone=tiny-test");
  http_refused(absl::StrCat(recommend_path, "&ks=", absl::StrJoin(many, ",")),
               "ks: 101 exceeds the limit 100");
  http_refused(absl::StrCat(recommend_path, "&as=", absl::StrJoin(many, ",")),
               "as: 101 exceeds the limit 100");
  http_refused("/api/runs/1/metrics?max_points=200000",
               "max_points: 200000 exceeds the limit 100000");
  http_refused(absl::StrCat("/api/runs/1/metrics?names=", absl::StrJoin(metrics.names(), ",")),
               "names: 257 exceeds the limit 256");
  httplib::Result at_the_cap = http.Get("/api/runs/1/metrics?max_points=100000", reader);
  ASSERT_TRUE(at_the_cap);
  EXPECT_EQ(at_the_cap->status, 200);

  EXPECT_EQ(TableDumps(*coordinator_->store()), before);
}

TEST_F(ReadScopeTest, DryRunGlobsStayInsideTheDataRoots) {
  Start();
  // Outside the root: a secret file, a directory the root links to, and its sibling.
  std::filesystem::create_directories(dir_ + "/secret");
  std::ofstream(dir_ + "/secret/train_1.bin") << "x";
  std::ofstream(dir_ + "/private.bin") << "x";
  std::filesystem::create_directory_symlink(dir_ + "/secret", data_ + "/linked");
  xmod::v1::SubmitSweepRequest request;
  *request.mutable_spec() = TinySweep(data_);
  request.set_dry_run(true);
  xmod::v1::SubmitSweepResponse response;
  const auto dry_run = [&](const std::string& glob) {
    request.mutable_spec()->mutable_data()->set_train_glob(glob);
    return stub_->SubmitSweep(As(kReader).get(), request, &response);
  };
  ASSERT_TRUE(dry_run(data_ + "/train_*.bin").ok());

  // Outside every root, existing or not, the answer is the same and names only the pattern.
  for (const std::string& glob :
       {dir_ + "/private.bin", dir_ + "/missing.bin", data_ + "/../private.bin",
        data_ + "/../missing.bin", std::string("/etc/passwd"), std::string("/etc/no-such-file"),
        std::string("data/train_*.bin")}) {
    grpc::Status status = dry_run(glob);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << glob;
    EXPECT_EQ(status.error_message(), absl::StrCat("data.train_glob: \"", glob,
                                                   "\" is not an absolute path under a data "
                                                   "root (the coordinator's --data_root: ",
                                                   data_, ")"))
        << glob;
  }
  // Under the root by its name, but resolving outside it (a link, a wildcard matching ".."):
  // counted as no match, the same answer as a pattern that matches nothing.
  for (const std::string& glob : {data_ + "/linked/train_*.bin", data_ + "/.*/private.bin",
                                  data_ + "/linked/nothing_*.bin"}) {
    grpc::Status status = dry_run(glob);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << glob;
    EXPECT_EQ(status.error_message(),
              absl::StrCat("data.train_glob: no file under a data root matches \"", glob,
                           "\" (the coordinator's --data_root: ", data_, ")"));
    EXPECT_THAT(status.error_message(), Not(HasSubstr("train_1.bin")));
  }
  // A user's real submission is held to the same roots.
  request.set_dry_run(false);
  grpc::Status status = dry_run(dir_ + "/private.bin");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  status = stub_->SubmitSweep(As(kUser).get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("data.train_glob:"));
}

TEST(DataRootFlagTest, ARelativeRootIsRefusedNamingTheFlag) {
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.http_listen = "";
  options.metrics_listen = "";
  const std::string dir = NewTestDir("root_flag");
  options.db_path = dir + "/x.db";
  options.data_roots = {"/data", "data"};
  absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), "--data_root: \"data\" is not an absolute directory path");
}

TEST_F(ReadScopeTest, AFitOnOneSweepHoldsUpNoOtherSweep) {
  // The fit of any decision on sweep `held` blocks until released.
  std::atomic<int64_t> held{0};
  absl::Notification fitting;
  absl::Notification release;
  AdaptiveControllerOptions adaptive;
  adaptive.TEST_before_decide = [&](int64_t sweep_id, const std::function<bool()>&) {
    if (sweep_id != held.load()) return;
    fitting.Notify();
    release.WaitForNotification();
  };
  Start(std::move(adaptive));
  xmod::v1::SweepSpec by_hand = AdaptiveTinySweep(data_);
  by_hand.clear_adaptive();
  const int64_t first = Submit(by_hand);
  const int64_t second = Submit(by_hand);
  const int64_t designed = Submit(AdaptiveTinySweep(data_));
  held = first;

  // A reader's proposal on the first sweep is fitting ...
  grpc::Status held_status;
  xmod::v1::DesignDecision held_decision;
  std::thread reader([&] {
    xmod::v1::ProposeRunsRequest propose;
    propose.set_sweep_id(first);
    *propose.add_targets() = AdaptiveTinySweep(data_).adaptive().targets(0);
    held_status = stub_->ProposeRuns(As(kReader).get(), propose, &held_decision);
  });
  // On every way out, a failed assertion included: the held fit ends and the reader is joined
  // (else the coordinator's shutdown would wait on its handler forever).
  absl::Cleanup release_reader = [&] {
    release.Notify();
    reader.join();
  };
  ASSERT_TRUE(fitting.WaitForNotificationWithTimeout(absl::Seconds(60)));

  // ... while a user's submitted proposal on the second completes ...
  xmod::v1::ProposeRunsRequest submit;
  submit.set_sweep_id(second);
  *submit.add_targets() = AdaptiveTinySweep(data_).adaptive().targets(0);
  submit.set_count(1);
  submit.set_submit(true);
  xmod::v1::DesignDecision submitted;
  grpc::Status status = stub_->ProposeRuns(As(kUser).get(), submit, &submitted);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_GT(submitted.id(), 0);
  // ... and the controller decides the adaptive sweep.
  coordinator_->adaptive()->Poll();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (Decisions(designed).empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(Decisions(designed).size(), 1u);
  EXPECT_FALSE(release.HasBeenNotified());

  std::move(release_reader).Invoke();
  EXPECT_TRUE(held_status.ok()) << held_status.error_message();
  EXPECT_EQ(held_decision.sweep_id(), first);
  EXPECT_TRUE(Decisions(first).empty());
}

TEST_F(ReadScopeTest, ProposalFitsAreCappedPerCredentialAndInAll) {
  // Every proposal's fit blocks until released.
  std::atomic<int> fitting{0};
  absl::Notification release;
  AdaptiveControllerOptions adaptive;
  adaptive.TEST_before_decide = [&](int64_t, const std::function<bool()>&) {
    ++fitting;
    release.WaitForNotification();
  };
  Start(std::move(adaptive));
  xmod::v1::SweepSpec by_hand = AdaptiveTinySweep(data_);
  by_hand.clear_adaptive();  // the controller decides nothing of its own
  xmod::v1::ProposeRunsRequest propose;
  propose.set_sweep_id(Submit(by_hand));
  *propose.add_targets() = AdaptiveTinySweep(data_).adaptive().targets(0);
  xmod::v1::ProposeRunsRequest submit = propose;
  submit.set_count(1);
  submit.set_submit(true);
  const auto call = [&](const char* token, const xmod::v1::ProposeRunsRequest& request) {
    xmod::v1::DesignDecision decision;
    return stub_->ProposeRuns(As(token).get(), request, &decision);
  };

  // Two fits of the reader and two of the user, one of them submitted, take every place.
  const std::vector<std::pair<const char*, const xmod::v1::ProposeRunsRequest*>> held_calls = {
      {kReader, &propose}, {kReader, &propose}, {kUser, &propose}, {kUser, &submit}};
  std::vector<grpc::Status> held(held_calls.size());
  std::vector<std::thread> callers;
  absl::Cleanup release_callers = [&] {
    release.Notify();
    for (std::thread& t : callers) t.join();
  };
  for (size_t i = 0; i < held_calls.size(); ++i) {
    callers.emplace_back([&, i] { held[i] = call(held_calls[i].first, *held_calls[i].second); });
  }
  ASSERT_TRUE(PollUntil([&] { return fitting.load() == 4; }, absl::Seconds(60)));

  // The reader's third is refused at once, naming its credential's limit; another credential's
  // first, naming the limit of all; neither started a fit.
  grpc::Status status = call(kReader, propose);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(),
            "ProposeRuns: read credential \"viewer\" already has 2 fits running (at most 2 per "
            "credential); try again when one has ended");
  status = call(kAuditor, propose);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(),
            "ProposeRuns: 4 fits running in all (at most 4); try again later");
  EXPECT_EQ(fitting.load(), 4);

  // Released, the held fits answer, and their places are free again.
  std::move(release_callers).Invoke();
  for (const grpc::Status& s : held) EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(call(kReader, propose).ok());
  EXPECT_TRUE(call(kAuditor, propose).ok());
}

TEST_F(ReadScopeTest, AProposalStopsWhenItsCallerGoesAwayOrTheCoordinatorShutsDown) {
  // Each proposal's fit starts once it was told to stop (or after 60 s).
  std::atomic<int> fitting{0};
  std::atomic<int> stopped{0};
  AdaptiveControllerOptions adaptive;
  adaptive.TEST_before_decide = [&](int64_t, const std::function<bool()>& stopping) {
    ++fitting;
    if (PollUntil(stopping, absl::Seconds(60))) ++stopped;
  };
  Start(std::move(adaptive));
  xmod::v1::SweepSpec by_hand = AdaptiveTinySweep(data_);
  by_hand.clear_adaptive();
  const int64_t sweep = Submit(by_hand);
  xmod::v1::ProposeRunsRequest propose;
  propose.set_sweep_id(sweep);
  *propose.add_targets() = AdaptiveTinySweep(data_).adaptive().targets(0);

  // A user's submitted proposal whose caller goes away while it fits ...
  xmod::v1::ProposeRunsRequest submit = propose;
  submit.set_count(1);
  submit.set_submit(true);
  std::unique_ptr<grpc::ClientContext> gone = As(kUser);
  grpc::Status gone_status;
  std::thread user([&] {
    xmod::v1::DesignDecision decision;
    gone_status = stub_->ProposeRuns(gone.get(), submit, &decision);
  });
  absl::Cleanup join_user = [&] {
    gone->TryCancel();
    user.join();
  };
  ASSERT_TRUE(PollUntil([&] { return fitting.load() == 1; }, absl::Seconds(60)));
  std::move(join_user).Invoke();
  EXPECT_EQ(gone_status.error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(PollUntil([&] { return stopped.load() == 1; }, absl::Seconds(60)));

  // ... and a reader's proposal fitting when the coordinator shuts down: it stops, and the
  // shutdown waits for no fit.
  grpc::Status shut_status;
  std::thread reader([&] {
    xmod::v1::DesignDecision decision;
    shut_status = stub_->ProposeRuns(As(kReader).get(), propose, &decision);
  });
  absl::Cleanup join_reader = [&] {
    coordinator_->Shutdown();
    reader.join();
  };
  ASSERT_TRUE(PollUntil([&] { return fitting.load() == 2; }, absl::Seconds(60)));
  std::move(join_reader).Invoke();
  EXPECT_EQ(stopped.load(), 2);
  EXPECT_EQ(shut_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(shut_status.error_message(),
            "the coordinator is shutting down: the design decision was stopped and stored "
            "nothing");

  // The stopped submitted proposal stored nothing.
  coordinator_.reset();
  Start();
  EXPECT_TRUE(Decisions(sweep).empty());
}

}  // namespace
}  // namespace xmod
