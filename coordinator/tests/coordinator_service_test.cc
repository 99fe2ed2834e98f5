// The coordinator in-process on loopback ports, driven through real gRPC stubs: submit,
// watch, register, acquire, report, finish; queries, fits, plans, studies; the HTTP JSON API,
// the Prometheus endpoint and the bearer token.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <httplib.h>

#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/build_info.h"
#include "common/status_origin.h"
#include "coordinator/coordinator.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

class ServiceTest : public testing::Test {
 protected:
  // `credentials`: lines of a credentials file ("" = none); `token`: what Context() sends.
  void Start(const std::string& credentials = "", const std::string& token = "") {
    dir_ = NewTestDir("svc");
    CoordinatorOptions options = LoopbackOptions(dir_);
    options.metrics_listen = "127.0.0.1:0";
    options.ports_file = dir_ + "/ports.json";
    options.dashboard_dir = dir_;
    absl::StatusOr<CredentialSet> set = CredentialSet::Parse(credentials, "test");
    ASSERT_TRUE(set.ok()) << set.status();
    options.credentials = std::make_shared<const CredentialSet>(*std::move(set));
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
  std::unique_ptr<grpc::ClientContext> refused = Context();
  grpc::Status status = user_->SubmitSweep(refused.get(), bad, &submitted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "grids[0].ks[2]: K must be >= 1, got 0");
  // The coordinator marks the status as its own (common/status_origin.h).
  const auto origin = refused->GetServerTrailingMetadata().find(kStatusOriginKey);
  ASSERT_NE(origin, refused->GetServerTrailingMetadata().end());
  EXPECT_EQ(origin->second, kStatusOriginCoordinator);
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

  // A watcher from the start: snapshot first, then changes, ends when the sweep ends. The
  // runs start once it holds its snapshot, so that their changes reach it as events.
  std::vector<xmod::v1::WatchSweepEvent> events;
  grpc::Status watch_status;
  absl::Notification snapshot_read;
  std::thread watcher([&] {
    auto context = Context();
    xmod::v1::WatchSweepRequest watch;
    watch.set_sweep_id(sweep_id);
    auto reader = user_->WatchSweep(context.get(), watch);
    xmod::v1::WatchSweepEvent event;
    while (reader->Read(&event)) {
      events.push_back(event);
      if (!snapshot_read.HasBeenNotified()) snapshot_read.Notify();
    }
    watch_status = reader->Finish();
  });
  EXPECT_TRUE(snapshot_read.WaitForNotificationWithTimeout(absl::Seconds(30)));

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
  // Bytes that are not UTF-8 (a stored spec, a cast blob) come back as a blob literal, not
  // as a response gRPC cannot send; UTF-8 text and blobs come back as they are.
  query.set_sql("SELECT X'00FF41', CAST(X'C3A9' AS TEXT), X'6869', 'x' || X'ED'");
  ASSERT_TRUE(user_->Query(Context().get(), query, &rows).ok());
  ASSERT_EQ(rows.rows_size(), 1);
  EXPECT_EQ(rows.rows(0).values(0), "X'00FF41'");
  EXPECT_EQ(rows.rows(0).values(1), "\xc3\xa9");
  EXPECT_EQ(rows.rows(0).values(2), "hi");
  EXPECT_EQ(rows.rows(0).values(3), "X'78ED'");

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
  EXPECT_EQ(planned.layers(), 161);  // docs/design.md: 28-layer backbone, A4K8 -> 161

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
  // Every call is timed, whatever its code: the bad one, the dry run and the submission.
  EXPECT_THAT(res->body, HasSubstr("xmod_rpc_duration_seconds_count{method=\"SubmitSweep\"} 3"));
  EXPECT_THAT(res->body, HasSubstr("xmod_rpc_duration_seconds_bucket{method=\"SubmitSweep\","
                                   "le=\"+Inf\"} 3"));
  EXPECT_THAT(res->body, HasSubstr(absl::StrCat("xmod_build_info{git_sha=\"", BuildGitSha(),
                                                "\",version=\"", BuildVersion(), "\"} 1")));
}

// Studies: validated (INVALID_ARGUMENT naming the field, NOT_FOUND for an unknown sweep,
// ALREADY_EXISTS for a taken name; nothing stored on error), members resolved by id or name,
// served over gRPC and HTTP; a study without a fit yet says so.
TEST_F(ServiceTest, StudiesAreValidatedStoredAndServed) {
  Start();
  xmod::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = TinySweep(dir_);
  xmod::v1::SubmitSweepResponse a;
  ASSERT_TRUE(user_->SubmitSweep(Context().get(), submit, &a).ok());
  submit.mutable_spec()->set_name("tiny-b");
  xmod::v1::SubmitSweepResponse b;
  ASSERT_TRUE(user_->SubmitSweep(Context().get(), submit, &b).ok());

  xmod::v1::CreateStudyRequest good;
  good.mutable_spec()->set_name("b4");
  good.mutable_spec()->set_description("two tiny sweeps");
  xmod::v1::StudyMember* kxl = good.mutable_spec()->add_members();
  kxl->set_sweep_id(a.sweep_id());
  kxl->set_role("kxl");
  xmod::v1::StudyMember* nact = good.mutable_spec()->add_members();
  nact->set_sweep_name("tiny-b");
  nact->set_role("nact");

  struct Bad {
    std::function<void(xmod::v1::StudySpec*)> edit;
    grpc::StatusCode code;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {[](xmod::v1::StudySpec* s) { s->set_name(""); }, grpc::StatusCode::INVALID_ARGUMENT,
       "name: a study needs a name"},
      {[](xmod::v1::StudySpec* s) { s->set_name("a b"); }, grpc::StatusCode::INVALID_ARGUMENT,
       "name: 'a b' may hold only letters, digits, '_', '-' and '.'"},
      {[](xmod::v1::StudySpec* s) { s->clear_members(); }, grpc::StatusCode::INVALID_ARGUMENT,
       "members: a study needs at least one member sweep"},
      {[](xmod::v1::StudySpec* s) { s->mutable_members(1)->set_role("kxl-2"); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "members[1].role: 'kxl-2' is not one of kxl, nact, axk, design"},
      {[](xmod::v1::StudySpec* s) { s->mutable_members(0)->set_role("design"); },
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("members[0].role: sweep ", a.sweep_id(),
                    " has no grid labelled kxl, nact or axk for role 'design'; give the sweep's "
                    "role")},
      {[](xmod::v1::StudySpec* s) { s->mutable_members(0)->set_sweep_id(999); },
       grpc::StatusCode::NOT_FOUND, "members[0].sweep_id: sweep 999 not found"},
      {[](xmod::v1::StudySpec* s) { s->mutable_members(1)->set_sweep_name("nope"); },
       grpc::StatusCode::NOT_FOUND, "members[1].sweep_name: no sweep is named 'nope'"},
      {[](xmod::v1::StudySpec* s) { s->mutable_members(1)->set_sweep_name("tiny"); },
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("members[1].sweep_id: sweep ", a.sweep_id(), " is also members[0]")},
      {[](xmod::v1::StudySpec* s) { s->set_bootstrap_samples(-1); },
       grpc::StatusCode::INVALID_ARGUMENT, "bootstrap_samples: must be in [0, 10000]"},
  };
  for (const Bad& test : bad) {
    xmod::v1::CreateStudyRequest request = good;
    test.edit(request.mutable_spec());
    xmod::v1::Study study;
    grpc::Status status = user_->CreateStudy(Context().get(), request, &study);
    EXPECT_EQ(status.error_code(), test.code) << test.message;
    EXPECT_EQ(status.error_message(), test.message);
  }
  xmod::v1::ListStudiesResponse listed;
  ASSERT_TRUE(user_->ListStudies(Context().get(), {}, &listed).ok());
  EXPECT_EQ(listed.studies_size(), 0);

  xmod::v1::Study created;
  grpc::Status status = user_->CreateStudy(Context().get(), good, &created);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GT(created.id(), 0);
  ASSERT_EQ(created.spec().members_size(), 2);
  EXPECT_EQ(created.spec().members(0).sweep_name(), "tiny");
  EXPECT_EQ(created.spec().members(1).sweep_id(), b.sweep_id());
  EXPECT_EQ(user_->CreateStudy(Context().get(), good, &created).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);

  xmod::v1::GetStudyRequest get;
  get.set_name("b4");
  xmod::v1::Study got;
  ASSERT_TRUE(user_->GetStudy(Context().get(), get, &got).ok());
  EXPECT_EQ(got.id(), created.id());
  EXPECT_EQ(got.spec().description(), "two tiny sweeps");
  get.set_name("b5");
  status = user_->GetStudy(Context().get(), get, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "study 'b5' not found");
  ASSERT_TRUE(user_->ListStudies(Context().get(), {}, &listed).ok());
  EXPECT_EQ(listed.studies_size(), 1);

  xmod::v1::GetFitRequest fit_request;
  fit_request.set_study("b4");
  xmod::v1::Fit fit;
  status = user_->GetFit(Context().get(), fit_request, &fit);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(), "no fit yet for study 'b4'");
  fit_request.set_sweep_id(a.sweep_id());
  EXPECT_EQ(user_->GetFit(Context().get(), fit_request, &fit).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  httplib::Client http("127.0.0.1", coordinator_->ports().http);
  auto res = http.Get("/api/studies");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_THAT(res->body, HasSubstr("\"name\":\"b4\""));
  res = http.Get("/api/studies/b4");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_THAT(res->body, HasSubstr("\"role\":\"nact\""));
  res = http.Get("/api/studies/b5");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  res = http.Get("/api/studies/b4/fit");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_THAT(res->body, HasSubstr("no fit yet for study 'b4'"));
}

TEST_F(ServiceTest, TokenIsRequiredWhenSet) {
  Start("user alice s3cret-s3cret-s3cret\n", "s3cret-s3cret-s3cret");
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
  res = http.Get("/api/sweeps", {{"Authorization", "Bearer s3cret-s3cret-s3cret"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

constexpr char kCredentials[] =
    "user alice alice-secret-0123456789\n"
    "read viewer viewer-secret-0123456789\n"
    "worker w1 w1-secret-0123456789abcdef\n"
    "worker w2 w2-secret-0123456789abcdef\n";

std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  AttachBearerToken(token, context.get());
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return context;
}

TEST_F(ServiceTest, ScopesSeparateUsersReadersAndWorkers) {
  Start(kCredentials, "alice-secret-0123456789");
  const std::string viewer = "viewer-secret-0123456789";
  const std::string w1 = "w1-secret-0123456789abcdef";
  xmod::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = TinySweep(dir_);
  xmod::v1::SubmitSweepResponse submitted;

  // Read-only: reads and dry runs yes, changes PERMISSION_DENIED, nothing stored.
  xmod::v1::ListSweepsResponse sweeps;
  EXPECT_TRUE(user_->ListSweeps(As(viewer).get(), {}, &sweeps).ok());
  grpc::Status status = user_->SubmitSweep(As(viewer).get(), submit, &submitted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("credential \"viewer\" has scope read"));
  submit.set_dry_run(true);
  EXPECT_TRUE(user_->SubmitSweep(As(viewer).get(), submit, &submitted).ok());
  submit.set_dry_run(false);
  ASSERT_TRUE(user_->SubmitSweep(Context().get(), submit, &submitted).ok());
  xmod::v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(submitted.sweep_id());
  xmod::v1::Sweep sweep;
  EXPECT_EQ(user_->CancelSweep(As(viewer).get(), cancel, &sweep).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  xmod::v1::CancelRunRequest cancel_run;
  cancel_run.set_run_id(submitted.runs(0).id());
  xmod::v1::Run run;
  EXPECT_EQ(user_->CancelRun(As(viewer).get(), cancel_run, &run).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  xmod::v1::QueryRequest query;
  query.set_sql("SELECT COUNT(*) FROM runs WHERE state = 'QUEUED'");
  xmod::v1::QueryResponse rows;
  ASSERT_TRUE(user_->Query(As(viewer).get(), query, &rows).ok());
  EXPECT_EQ(rows.rows(0).values(0), "3");
  xmod::v1::CreateStudyRequest create;
  create.mutable_spec()->set_name("s");
  xmod::v1::StudyMember* member = create.mutable_spec()->add_members();
  member->set_sweep_id(submitted.sweep_id());
  member->set_role("kxl");
  xmod::v1::Study study;
  EXPECT_EQ(user_->CreateStudy(As(viewer).get(), create, &study).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  xmod::v1::ListStudiesResponse studies;
  EXPECT_TRUE(user_->ListStudies(As(viewer).get(), {}, &studies).ok());
  EXPECT_EQ(studies.studies_size(), 0);

  // A worker credential reaches only the WorkerGateway; a user one never does.
  EXPECT_EQ(user_->ListSweeps(As(w1).get(), {}, &sweeps).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  xmod::v1::RegisterRequest reg;
  reg.set_worker_name("w1");
  reg.add_slots()->set_index(0);
  xmod::v1::RegisterResponse registered;
  EXPECT_EQ(worker_->Register(Context().get(), reg, &registered).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(worker_->Register(As(viewer).get(), reg, &registered).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(worker_->Register(As(w1).get(), reg, &registered).ok());
  // Unknown or missing tokens: UNAUTHENTICATED.
  EXPECT_EQ(user_->ListSweeps(As("nope-nope-nope-nope").get(), {}, &sweeps).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(worker_->Register(As("").get(), reg, &registered).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(ServiceTest, AWorkerCredentialIsBoundToItsWorker) {
  Start(kCredentials, "alice-secret-0123456789");
  const std::string w1 = "w1-secret-0123456789abcdef";
  const std::string w2 = "w2-secret-0123456789abcdef";
  xmod::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = TinySweep(dir_);
  xmod::v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(user_->SubmitSweep(Context().get(), submit, &submitted).ok());

  // w2's credential cannot register as w1.
  xmod::v1::RegisterRequest reg;
  reg.set_worker_name("w1");
  reg.add_slots()->set_index(0);
  xmod::v1::RegisterResponse r1;
  grpc::Status status = worker_->Register(As(w2).get(), reg, &r1);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), "worker credential \"w2\" may not register as worker \"w1\"");
  ASSERT_TRUE(worker_->Register(As(w1).get(), reg, &r1).ok());
  reg.set_worker_name("w2");
  xmod::v1::RegisterResponse r2;
  ASSERT_TRUE(worker_->Register(As(w2).get(), reg, &r2).ok());

  xmod::v1::AcquireRunRequest acquire;
  acquire.set_worker_id(r1.worker_id());
  acquire.add_free_slots(0);
  acquire.set_wait_ms(5000);
  xmod::v1::AcquireRunResponse assignment;
  // w2 cannot acquire (or heartbeat) as w1's worker id.
  EXPECT_EQ(worker_->AcquireRun(As(w2).get(), acquire, &assignment).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  xmod::v1::HeartbeatRequest beat;
  beat.set_worker_id(r1.worker_id());
  xmod::v1::HeartbeatResponse orders;
  EXPECT_EQ(worker_->Heartbeat(As(w2).get(), beat, &orders).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(worker_->AcquireRun(As(w1).get(), acquire, &assignment).ok());
  ASSERT_TRUE(assignment.has_assignment());
  const int64_t run_id = assignment.assignment().run_id();

  // w2, under its own worker id, cannot report for or finish w1's attempt.
  xmod::v1::ReportCheckpointRequest checkpoint;
  checkpoint.set_worker_id(r2.worker_id());
  checkpoint.set_run_id(run_id);
  checkpoint.set_attempt(1);
  checkpoint.set_step(1);
  checkpoint.set_path("/dev/zero");
  xmod::v1::ReportCheckpointResponse recorded;
  status = worker_->ReportCheckpoint(As(w2).get(), checkpoint, &recorded);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(),
            absl::StrCat("attempt 1 of run ", run_id, " is held by worker \"w1\", not \"w2\""));
  xmod::v1::ReportMetricsRequest metrics;
  metrics.set_worker_id(r2.worker_id());
  metrics.set_run_id(run_id);
  metrics.set_attempt(1);
  metrics.add_points()->set_name("train/loss");
  xmod::v1::ReportMetricsResponse ack;
  EXPECT_EQ(worker_->ReportMetrics(As(w2).get(), metrics, &ack).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  xmod::v1::FinishRunRequest finish;
  finish.set_worker_id(r2.worker_id());
  finish.set_run_id(run_id);
  finish.set_attempt(1);
  finish.set_outcome(xmod::v1::OUTCOME_FAILED);
  xmod::v1::FinishRunResponse finished;
  EXPECT_EQ(worker_->FinishRun(As(w2).get(), finish, &finished).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Nothing changed: the run still runs, with no checkpoint.
  xmod::v1::GetRunRequest get_run;
  get_run.set_run_id(run_id);
  xmod::v1::GetRunResponse shown;
  ASSERT_TRUE(user_->GetRun(Context().get(), get_run, &shown).ok());
  EXPECT_EQ(shown.run().state(), xmod::v1::RUNNING);
  EXPECT_EQ(shown.checkpoints_size(), 0);
  // The holder itself may.
  finish.set_worker_id(r1.worker_id());
  finish.set_outcome(xmod::v1::OUTCOME_SUCCEEDED);
  EXPECT_TRUE(worker_->FinishRun(As(w1).get(), finish, &finished).ok());
}

TEST_F(ServiceTest, DashboardLogsInWithACookieNeverATokenInTheUrl) {
  Start(kCredentials, "alice-secret-0123456789");
  httplib::Client http("127.0.0.1", coordinator_->ports().http);
  auto res = http.Get("/api/session");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_THAT(res->body, HasSubstr("\"authenticated\":false,\"required\":true"));
  // A token in the URL is not accepted (it would end up in logs and history).
  res = http.Get("/api/sweeps?token=viewer-secret-0123456789");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = http.Post("/api/login", "wrong-wrong-wrong-wrong", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_FALSE(res->has_header("Set-Cookie"));
  res = http.Post("/api/login", "w1-secret-0123456789abcdef", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);  // a worker credential does not open the dashboard

  res = http.Post("/api/login", "viewer-secret-0123456789", "text/plain");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const std::string cookie = res->get_header_value("Set-Cookie");
  EXPECT_THAT(cookie, HasSubstr("; HttpOnly"));
  EXPECT_THAT(cookie, HasSubstr("; SameSite=Strict"));
  EXPECT_THAT(cookie, ::testing::Not(HasSubstr("viewer-secret")));
  const std::string session = cookie.substr(0, cookie.find(';'));
  EXPECT_THAT(session, ::testing::StartsWith("xmod_session="));
  res = http.Get("/api/sweeps", {{"Cookie", session}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = http.Get("/api/session", {{"Cookie", session}});
  ASSERT_TRUE(res);
  EXPECT_THAT(res->body, HasSubstr("\"authenticated\":true"));
  EXPECT_THAT(res->body, HasSubstr("\"name\":\"viewer\",\"scope\":\"read\""));
  res = http.Get("/api/sweeps", {{"Cookie", "xmod_session=00ff"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = http.Post("/api/logout", {{"Cookie", session}}, "", "text/plain");
  ASSERT_TRUE(res);
  res = http.Get("/api/sweeps", {{"Cookie", session}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  // Bearer headers still work for scripts; a worker credential is refused.
  res = http.Get("/api/sweeps", {{"Authorization", "Bearer viewer-secret-0123456789"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = http.Get("/api/sweeps", {{"Authorization", "Bearer w1-secret-0123456789abcdef"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
}

TEST_F(ServiceTest, QueriesAndSpecsAreBoundedOnTheServer) {
  Start();
  xmod::v1::QueryRequest query;
  query.set_sql(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<10000) "
      "SELECT zeroblob(1000000) FROM n");
  xmod::v1::QueryResponse rows;
  grpc::Status status = user_->Query(Context().get(), query, &rows);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("exceeds the limit of 16777216 bytes per response"));
  // The client's max_rows cannot lift the server's row ceiling: past it, it is refused.
  query.set_sql(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<20000) "
      "SELECT i FROM n");
  query.set_max_rows(1000000);
  status = user_->Query(Context().get(), query, &rows);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "max_rows: 1000000 exceeds the limit 10000");
  query.set_max_rows(0);
  ASSERT_TRUE(user_->Query(Context().get(), query, &rows).ok());
  EXPECT_EQ(rows.rows_size(), 10000);
  EXPECT_TRUE(rows.truncated());

  // Spec limits: refused naming the field, nothing stored.
  xmod::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = TinySweep(dir_);
  submit.mutable_spec()->mutable_fit()->set_bootstrap_samples(1000000);
  xmod::v1::SubmitSweepResponse submitted;
  status = user_->SubmitSweep(Context().get(), submit, &submitted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "fit.bootstrap_samples: 1000000 refits, at most 10000");
  *submit.mutable_spec() = TinySweep(dir_);
  for (int i = 0; i < 5000; ++i) submit.mutable_spec()->mutable_grids(0)->add_ks(2);
  status = user_->SubmitSweep(Context().get(), submit, &submitted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "grids[0].ks: 5003 values, at most 1000");
  // A request past the message limit never reaches the handler.
  *submit.mutable_spec() = TinySweep(dir_);
  submit.mutable_spec()->set_description(std::string(20 << 20, 'd'));
  status = user_->SubmitSweep(Context().get(), submit, &submitted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  xmod::v1::ListSweepsResponse sweeps;
  ASSERT_TRUE(user_->ListSweeps(Context().get(), {}, &sweeps).ok());
  EXPECT_EQ(sweeps.sweeps_size(), 0);
}

}  // namespace
}  // namespace xmod
