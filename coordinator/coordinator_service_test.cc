// The coordinator in-process on loopback ports, driven through real gRPC stubs: submit,
// watch, register, acquire, report, finish; queries, fits, plans; the HTTP JSON API, the
// Prometheus endpoint and the bearer token.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <httplib.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "coordinator/coordinator.h"
#include "coordinator/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

class ServiceTest : public testing::Test {
 protected:
  void Start(const std::string& token = "") {
    dir_ = NewTestDir("svc");
    CoordinatorOptions options;
    options.listen = "127.0.0.1:0";
    options.http_listen = "127.0.0.1:0";
    options.metrics_listen = "127.0.0.1:0";
    options.db_path = dir_ + "/x.db";
    options.checkpoint_root = dir_ + "/ckpt";
    options.ports_file = dir_ + "/ports.json";
    options.dashboard_dir = dir_;
    options.token = token;
    token_ = token;
    absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = *std::move(c);
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", coordinator_->ports().grpc),
                                       grpc::InsecureChannelCredentials());
    user_ = xmod::v1::Coordinator::NewStub(channel);
    worker_ = xmod::v1::WorkerGateway::NewStub(channel);
  }

  std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    AttachBearerToken(token_, context.get());
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return context;
  }

  std::string dir_;
  std::string token_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<xmod::v1::Coordinator::Stub> user_;
  std::unique_ptr<xmod::v1::WorkerGateway::Stub> worker_;
};

TEST_F(ServiceTest, SweepRunsToCompletionThroughBothApis) {
  Start();
  // Ports file for scripts.
  std::ifstream ports(dir_ + "/ports.json");
  std::string json((std::istreambuf_iterator<char>(ports)), std::istreambuf_iterator<char>());
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"grpc\":", coordinator_->ports().grpc)));

  // Bad input: INVALID_ARGUMENT naming the field, nothing stored.
  xmod::v1::SubmitSweepRequest bad;
  *bad.mutable_spec() = TinySweep(dir_);
  bad.mutable_spec()->mutable_grids(0)->set_ks(2, 0);
  xmod::v1::SubmitSweepResponse submitted;
  grpc::Status status = user_->SubmitSweep(Context().get(), bad, &submitted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "grids[0].ks[2]: K must be >= 1, got 0");
  xmod::v1::ListSweepsResponse sweeps;
  ASSERT_TRUE(user_->ListSweeps(Context().get(), {}, &sweeps).ok());
  EXPECT_EQ(sweeps.sweeps_size(), 0);

  // Dry run stores nothing either.
  xmod::v1::SubmitSweepRequest request;
  *request.mutable_spec() = TinySweep(dir_);
  request.set_dry_run(true);
  ASSERT_TRUE(user_->SubmitSweep(Context().get(), request, &submitted).ok());
  EXPECT_EQ(submitted.sweep_id(), 0);
  EXPECT_EQ(submitted.runs_size(), 3);
  request.set_dry_run(false);
  submitted.Clear();
  ASSERT_TRUE(user_->SubmitSweep(Context().get(), request, &submitted).ok());
  const int64_t sweep_id = submitted.sweep_id();
  ASSERT_GT(sweep_id, 0);
  ASSERT_EQ(submitted.runs_size(), 3);

  // A watcher from the start: snapshot first, then changes, ends when the sweep ends.
  std::vector<xmod::v1::WatchSweepEvent> events;
  grpc::Status watch_status;
  std::thread watcher([&] {
    auto context = Context();
    xmod::v1::WatchSweepRequest watch;
    watch.set_sweep_id(sweep_id);
    auto reader = user_->WatchSweep(context.get(), watch);
    xmod::v1::WatchSweepEvent event;
    while (reader->Read(&event)) events.push_back(event);
    watch_status = reader->Finish();
  });

  xmod::v1::RegisterRequest reg;
  reg.set_worker_name("w1");
  reg.add_slots()->set_index(0);
  xmod::v1::RegisterResponse registered;
  ASSERT_TRUE(worker_->Register(Context().get(), reg, &registered).ok());
  for (int i = 0; i < 3; ++i) {
    xmod::v1::AcquireRunRequest acquire;
    acquire.set_worker_id(registered.worker_id());
    acquire.add_free_slots(0);
    acquire.set_wait_ms(5000);
    xmod::v1::AcquireRunResponse assignment;
    ASSERT_TRUE(worker_->AcquireRun(Context().get(), acquire, &assignment).ok());
    ASSERT_TRUE(assignment.has_assignment());
    const int64_t run_id = assignment.assignment().run_id();
    xmod::v1::ReportMetricsRequest metrics;
    metrics.set_worker_id(registered.worker_id());
    metrics.set_run_id(run_id);
    metrics.set_attempt(1);
    metrics.set_first_seq(0);
    for (int step = 1; step <= 4; ++step) {
      xmod::v1::MetricPoint* p = metrics.add_points();
      p->set_name(step == 4 ? "val/loss" : "train/loss");
      p->set_step(step);
      p->set_tokens(step * 128);
      p->set_flops(step * 1e9);
      p->set_value(6 - step * 0.5);
    }
    xmod::v1::ReportMetricsResponse ack;
    ASSERT_TRUE(worker_->ReportMetrics(Context().get(), metrics, &ack).ok());
    EXPECT_EQ(ack.acked_seq(), 3);
    xmod::v1::FinishRunRequest finish;
    finish.set_worker_id(registered.worker_id());
    finish.set_run_id(run_id);
    finish.set_attempt(1);
    finish.set_outcome(xmod::v1::OUTCOME_SUCCEEDED);
    finish.set_last_acked_seq(3);
    xmod::v1::FinishRunResponse finished;
    ASSERT_TRUE(worker_->FinishRun(Context().get(), finish, &finished).ok());
  }
  // Nothing left: the long poll returns empty after its wait.
  xmod::v1::AcquireRunRequest acquire;
  acquire.set_worker_id(registered.worker_id());
  acquire.add_free_slots(0);
  acquire.set_wait_ms(50);
  xmod::v1::AcquireRunResponse none;
  ASSERT_TRUE(worker_->AcquireRun(Context().get(), acquire, &none).ok());
  EXPECT_FALSE(none.has_assignment());

  watcher.join();
  EXPECT_TRUE(watch_status.ok()) << watch_status.error_message();
  ASSERT_GE(events.size(), 2u);
  EXPECT_TRUE(events.front().snapshot());
  EXPECT_EQ(events.front().runs_size(), 3);
  EXPECT_FALSE(events.back().snapshot());
  EXPECT_EQ(events.back().sweep().state(), xmod::v1::SWEEP_DONE);

  xmod::v1::GetSweepRequest get_sweep;
  get_sweep.set_sweep_id(sweep_id);
  xmod::v1::Sweep sweep;
  ASSERT_TRUE(user_->GetSweep(Context().get(), get_sweep, &sweep).ok());
  EXPECT_EQ(sweep.state(), xmod::v1::SWEEP_DONE);
  EXPECT_EQ(sweep.run_counts().at("SUCCEEDED"), 3);

  xmod::v1::GetRunRequest get_run;
  get_run.set_run_id(submitted.runs(0).id());
  xmod::v1::GetRunResponse run;
  ASSERT_TRUE(user_->GetRun(Context().get(), get_run, &run).ok());
  EXPECT_EQ(run.run().state(), xmod::v1::SUCCEEDED);
  ASSERT_EQ(run.attempts_size(), 1);
  EXPECT_EQ(run.attempts(0).outcome(), "succeeded");
  EXPECT_DOUBLE_EQ(run.run().progress().val_loss(), 4.0);

  xmod::v1::GetMetricsRequest get_metrics;
  get_metrics.set_run_id(submitted.runs(0).id());
  get_metrics.add_names("train/loss");
  xmod::v1::GetMetricsResponse series;
  ASSERT_TRUE(user_->GetMetrics(Context().get(), get_metrics, &series).ok());
  ASSERT_EQ(series.series_size(), 1);
  EXPECT_EQ(series.series(0).points_size(), 3);

  xmod::v1::QueryRequest query;
  query.set_sql("SELECT name, state, final_val_loss FROM run_summary ORDER BY run_id");
  xmod::v1::QueryResponse rows;
  ASSERT_TRUE(user_->Query(Context().get(), query, &rows).ok());
  ASSERT_EQ(rows.rows_size(), 3);
  EXPECT_EQ(rows.rows(0).values(1), "SUCCEEDED");
  EXPECT_EQ(rows.rows(0).values(2), "4.0");
  query.set_sql("DELETE FROM runs");
  EXPECT_EQ(user_->Query(Context().get(), query, &rows).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  xmod::v1::GetFitRequest get_fit;
  get_fit.set_sweep_id(sweep_id);
  xmod::v1::Fit fit;
  status = user_->GetFit(Context().get(), get_fit, &fit);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(), absl::StrCat("no fit yet for sweep ", sweep_id));

  xmod::v1::PlanRequest plan;
  plan.mutable_model()->set_arch(xmod::v1::XMOD);
  plan.mutable_model()->mutable_backbone()->set_name("556M");
  plan.mutable_model()->set_k(8);
  plan.mutable_model()->set_a(4);
  plan.set_seq_len(2048);
  xmod::v1::PlanResponse planned;
  ASSERT_TRUE(user_->Plan(Context().get(), plan, &planned).ok());
  EXPECT_EQ(planned.layers(), 161);  // ARCHITECTURE.md: 28-layer backbone, A4K8 -> 161

  // The dashboard's JSON API and the Prometheus endpoint.
  httplib::Client http("127.0.0.1", coordinator_->ports().http);
  auto res = http.Get(absl::StrCat("/api/sweeps/", sweep_id, "/runs").c_str());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_THAT(res->body, HasSubstr("\"SUCCEEDED\""));
  res = http.Get(
      absl::StrCat("/api/runs/", submitted.runs(0).id(), "/metrics?names=val/loss&max_points=10")
          .c_str());
  ASSERT_TRUE(res);
  EXPECT_THAT(res->body, HasSubstr("val/loss"));
  EXPECT_THAT(res->body, ::testing::Not(HasSubstr("train/loss")));
  res = http.Get(absl::StrCat("/api/sweeps/", sweep_id, "/fit").c_str());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  httplib::Client prom("127.0.0.1", coordinator_->ports().metrics);
  res = prom.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_THAT(res->body, HasSubstr("xmod_metric_points_ingested_total 12"));
  EXPECT_THAT(res->body, HasSubstr("xmod_rpc_requests_total{code=\"INVALID_ARGUMENT\","
                                   "method=\"SubmitSweep\"} 1"));
}

TEST_F(ServiceTest, TokenIsRequiredWhenSet) {
  Start("s3cret");
  xmod::v1::ListSweepsResponse sweeps;
  grpc::ClientContext bare;
  EXPECT_EQ(user_->ListSweeps(&bare, {}, &sweeps).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext bare_worker;
  xmod::v1::RegisterResponse registered;
  EXPECT_EQ(worker_->Register(&bare_worker, {}, &registered).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(user_->ListSweeps(Context().get(), {}, &sweeps).ok());
  httplib::Client http("127.0.0.1", coordinator_->ports().http);
  auto res = http.Get("/api/sweeps");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = http.Get("/api/sweeps", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

}  // namespace
}  // namespace xmod
