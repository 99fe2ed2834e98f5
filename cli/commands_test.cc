// Tests of the xmodctl commands against an in-process fake Coordinator (a grpc::Server on
// 127.0.0.1:0): submit (text, JSON, dry run, refused spec, syntax error), listings in every
// output format, the watch stream rendering until the sweep ends, query, run show, fits of
// sweeps and studies, study create / list / show, tokens and connection failures.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "cli/app.h"
#include "common/files.h"
#include "common/test_certs.h"
#include "common/transport.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using xmod::v1::Run;

Run MakeRun(int64_t id, const std::string& name, xmod::v1::RunState state, double flops,
            double budget) {
  Run run;
  run.set_id(id);
  run.set_sweep_id(7);
  run.set_name(name);
  run.set_state(state);
  run.mutable_spec()->mutable_model()->set_arch(xmod::v1::XMOD);
  run.mutable_spec()->mutable_model()->set_k(4);
  run.mutable_spec()->mutable_model()->set_a(1);
  run.mutable_spec()->mutable_model()->mutable_backbone()->set_name("cpu-d128");
  run.mutable_spec()->mutable_training()->set_seq_len(256);
  run.mutable_spec()->mutable_training()->set_flop_budget(budget);
  run.mutable_progress()->set_flops(flops);
  run.mutable_progress()->set_flop_budget(budget);
  // As the coordinator sends it (coordinator/store/run_progress.h).
  run.mutable_progress()->set_fraction(state == xmod::v1::SUCCEEDED ? 1 : flops / budget);
  run.set_forward_flops_per_token(1.5e6);
  run.set_total_params(2.64e6);
  return run;
}

constexpr char kPortReason[] =
    "waiting for a rendezvous port: every port of w1 (host-1:29500-29500) is held by an open "
    "gang";

class FakeCoordinator final : public xmod::v1::Coordinator::Service {
 public:
  grpc::Status SubmitSweep(grpc::ServerContext* context,
                           const xmod::v1::SubmitSweepRequest* request,
                           xmod::v1::SubmitSweepResponse* response) override {
    Record(context);
    absl::MutexLock lock(&mu_);
    last_submit_ = *request;
    ++submits_;
    for (int g = 0; g < request->spec().grids_size(); ++g) {
      const auto& ks = request->spec().grids(g).ks();
      for (int i = 0; i < ks.size(); ++i) {
        if (ks[i] < 1) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              absl::StrCat("grids[", g, "].ks[", i, "]: K must be >= 1"));
        }
      }
    }
    response->set_sweep_id(request->dry_run() ? 0 : 7);
    Run dense =
        MakeRun(request->dry_run() ? 0 : 1, "dense-cpu-d128-L256", xmod::v1::QUEUED, 0, 3e12);
    dense.mutable_spec()->mutable_model()->set_arch(xmod::v1::DENSE);
    dense.mutable_spec()->mutable_model()->set_k(1);
    *response->add_runs() = dense;
    *response->add_runs() =
        MakeRun(request->dry_run() ? 0 : 2, "xmod-cpu-d128-L256-K4-A1", xmod::v1::QUEUED, 0, 3e12);
    if (request->dry_run()) {  // the dense run measured on CPU, the sparse one not
      xmod::v1::SweepForecast* f = response->mutable_forecast();
      xmod::v1::RunForecast* measured = f->add_runs();
      measured->set_name("dense-cpu-d128-L256");
      measured->set_tokens(666667);
      measured->set_tokens_per_second(2500);
      measured->set_device("cpu");
      measured->set_slot_hours(666667 / 2500.0 / 3600);
      measured->set_source("median of 2 finished runs of the same model, cpu-d128 DENSE, L 256");
      xmod::v1::RunForecast* unmeasured = f->add_runs();
      unmeasured->set_name("xmod-cpu-d128-L256-K4-A1");
      unmeasured->set_source("no finished run of cpu-d128 XMOD, L 256, auto to go by");
      f->set_cpu_slot_hours(measured->slot_hours());
      f->set_unmeasured_runs(1);
      f->set_cpu_slots(2);
      f->set_wall_seconds(666667 / 2500.0);
    }
    return grpc::Status::OK;
  }

  grpc::Status ListSweeps(grpc::ServerContext* context, const xmod::v1::ListSweepsRequest*,
                          xmod::v1::ListSweepsResponse* response) override {
    Record(context);
    auto* s = response->add_sweeps();
    s->set_id(7);
    s->set_name("demo, small");
    s->set_state(xmod::v1::SWEEP_ACTIVE);
    (*s->mutable_run_counts())["RUNNING"] = 2;
    (*s->mutable_run_counts())["QUEUED"] = 3;
    (*s->mutable_run_counts())["SUCCEEDED"] = 4;
    return grpc::Status::OK;
  }

  grpc::Status GetSweep(grpc::ServerContext* context, const xmod::v1::GetSweepRequest* request,
                        xmod::v1::Sweep* sweep) override {
    Record(context);
    sweep->set_id(request->sweep_id());
    sweep->set_name("adaptive");
    sweep->set_state(xmod::v1::SWEEP_ACTIVE);
    (*sweep->mutable_run_counts())["RUNNING"] = 1;
    return grpc::Status::OK;
  }

  grpc::Status ListRuns(grpc::ServerContext* context, const xmod::v1::ListRunsRequest* request,
                        xmod::v1::ListRunsResponse* response) override {
    Record(context);
    absl::MutexLock lock(&mu_);
    last_list_runs_ = *request;
    Run run = MakeRun(2, "xmod-cpu-d128-L256-K4-A1", xmod::v1::RUNNING, 1.5e12, 3e12);
    run.mutable_progress()->set_train_loss(4.123456);
    *response->add_runs() = run;
    return grpc::Status::OK;
  }

  grpc::Status GetRun(grpc::ServerContext* context, const xmod::v1::GetRunRequest* request,
                      xmod::v1::GetRunResponse* response) override {
    Record(context);
    if (request->run_id() == 3) {  // a gang waiting for a rendezvous port
      *response->mutable_run() = MakeRun(3, "xmod-cpu-d128-L256-K1-A1", xmod::v1::QUEUED, 0, 3e12);
      response->set_pending_reason(kPortReason);
      return grpc::Status::OK;
    }
    if (request->run_id() == 4) {  // succeeded at the last whole step, short of the budget
      Run done = MakeRun(4, "xmod-cpu-d128-L256-K4-A1", xmod::v1::SUCCEEDED, 2.994e12, 3e12);
      done.mutable_progress()->set_step(998);
      done.mutable_progress()->set_planned_steps(998);
      *response->mutable_run() = done;
      return grpc::Status::OK;
    }
    if (request->run_id() == 5) {  // evaluated zero-shot at the end (GetMetrics below)
      Run done = MakeRun(5, "xmod-cpu-d128-L256-K4-A1", xmod::v1::SUCCEEDED, 3e12, 3e12);
      for (const char* task : {"gcide", "lambada"}) {
        done.mutable_spec()->mutable_training()->add_eval_tasks()->set_task(task);
      }
      *response->mutable_run() = done;
      return grpc::Status::OK;
    }
    if (request->run_id() != 2) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("run ", request->run_id(), " not found"));
    }
    *response->mutable_run() = MakeRun(2, "xmod-cpu-d128-L256-K4-A1", xmod::v1::FAILED, 1e12, 3e12);
    auto* a = response->add_attempts();
    a->set_number(1);
    a->set_worker("w1");
    a->set_outcome("failed");
    a->set_exit_code(1);
    a->set_error("loss is NaN");
    auto* c = response->add_checkpoints();
    c->set_step(40);
    c->set_path("/ckpt/run2/step40.pt");
    return grpc::Status::OK;
  }

  // Run 5's zero-shot metrics as the trainer reports them (model/eval/evaluate.h EvalMetrics):
  // each series asked for that exists, with one point.
  grpc::Status GetMetrics(grpc::ServerContext* context, const xmod::v1::GetMetricsRequest* request,
                          xmod::v1::GetMetricsResponse* response) override {
    Record(context);
    const std::map<std::string, double> eval = {{"eval/gcide/acc", 0.4375},
                                                {"eval/gcide/acc_stderr", 0.0222},
                                                {"eval/gcide/acc_norm", 0.4375},
                                                {"eval/gcide/acc_norm_stderr", 0.0222},
                                                {"eval/gcide/n", 500},
                                                {"eval/lambada/acc", 0.125},
                                                {"eval/lambada/acc_stderr", 0.0331},
                                                {"eval/lambada/ppl", 812.5},
                                                {"eval/lambada/ppl_stderr", 97.25},
                                                {"eval/lambada/n", 96}};
    for (const std::string& name : request->names()) {
      auto it = eval.find(name);
      if (request->run_id() != 5 || it == eval.end()) continue;
      xmod::v1::MetricSeries* series = response->add_series();
      series->set_name(name);
      series->add_points()->set_value(it->second);
    }
    return grpc::Status::OK;
  }

  grpc::Status WatchSweep(grpc::ServerContext* context, const xmod::v1::WatchSweepRequest*,
                          grpc::ServerWriter<xmod::v1::WatchSweepEvent>* writer) override {
    Record(context);
    std::vector<xmod::v1::WatchSweepEvent> events;
    bool drop = false;
    {
      absl::MutexLock lock(&mu_);
      events = watch_events_;
      drop = drop_next_watches_ > 0;
      if (drop) --drop_next_watches_;
    }
    if (drop) {
      // As a coordinator going away mid-stream: the snapshot, then UNAVAILABLE.
      writer->Write(events.front());
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
    }
    for (const auto& e : events) {
      if (!writer->Write(e)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status Query(grpc::ServerContext* context, const xmod::v1::QueryRequest* request,
                     xmod::v1::QueryResponse* response) override {
    Record(context);
    if (request->sql().rfind("SELECT", 0) != 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "sql: only SELECT or WITH");
    }
    response->add_columns("name");
    response->add_columns("K");
    response->add_columns("val_loss");
    auto* row = response->add_rows();
    row->add_values("xmod-K4");
    row->add_values("4");
    row->add_values("3.912345");
    row = response->add_rows();
    row->add_values("dense");
    row->add_values("");
    row->add_values("3.85");
    return grpc::Status::OK;
  }

  grpc::Status GetFit(grpc::ServerContext* context, const xmod::v1::GetFitRequest* request,
                      xmod::v1::Fit* fit) override {
    Record(context);
    fit->set_sweep_id(request->sweep_id());
    if (!request->study().empty()) {
      fit->set_study_id(3);
      fit->set_by_sweep(true);
      fit->set_e_stage2(0.07);
    }
    fit->set_n_obs(42);
    fit->set_r2(0.987);
    fit->set_rmse(0.0031);
    fit->mutable_params()->set_e(0.05);
    fit->mutable_params()->set_rho_k(1.25);
    fit->add_at_bound("eta_l");
    auto* g = fit->add_cv();
    g->set_group("L=512");
    g->set_rmse(0.0042);
    g->set_n(6);
    return grpc::Status::OK;
  }

  grpc::Status Predict(grpc::ServerContext* context, const xmod::v1::PredictRequest* request,
                       xmod::v1::PredictResponse* response) override {
    Record(context);
    absl::MutexLock lock(&mu_);
    last_predict_ = *request;
    for (const auto& point : request->points()) {
      auto* p = response->add_predictions();
      *p->mutable_point() = point;
      p->set_delta(-0.01 * point.k());
      p->set_loss(3.5 - 0.01 * point.k());
    }
    return grpc::Status::OK;
  }

  grpc::Status Recommend(grpc::ServerContext* context, const xmod::v1::RecommendRequest* request,
                         xmod::v1::RecommendResponse* response) override {
    Record(context);
    absl::MutexLock lock(&mu_);
    last_recommend_ = *request;
    response->set_k(4);
    response->set_a(2);
    response->set_delta(-0.0321);
    response->set_total_params(2.64e9);
    response->set_closed_form_k(4.95);
    for (int k : {4, 8, 2}) {
      auto* p = response->add_candidates();
      p->mutable_point()->set_k(k);
      p->mutable_point()->set_a(2);
      p->mutable_point()->set_flops(request->flops());
      p->mutable_point()->set_seq_len(request->seq_len());
      p->mutable_point()->set_backbone(request->backbone());
      p->set_delta(-0.03 + 0.001 * k);
    }
    return grpc::Status::OK;
  }

  // A decision with one recommendation and two proposals, the first queued with --submit.
  static xmod::v1::DesignDecision Decision(const xmod::v1::ProposeRunsRequest& request) {
    xmod::v1::DesignDecision d;
    d.set_id(4);
    d.set_sweep_id(request.sweep_id());
    d.set_source("propose");
    d.set_compute_spent(2e12);
    d.set_compute_budget(request.compute_left() > 0 ? 2e12 + request.compute_left() : 0);
    d.set_observations(9);
    auto* r = d.add_recommendations();
    r->mutable_target()->set_flops(5e11);
    r->mutable_target()->set_seq_len(256);
    r->mutable_target()->set_backbone("cpu-d96");
    r->set_k(8);
    r->set_a(2);
    r->set_delta(-0.0431);
    r->set_p_best(0.75);
    for (int k : {16, 4}) {
      auto* p = d.add_proposals();
      p->set_backbone("cpu-d96");
      p->set_seq_len(256);
      p->set_k(k);
      p->set_a(2);
      p->set_flops(5e11);
      p->set_cost_flops(5e11);
      p->set_score(0.5 / k);
      p->set_reason(absl::StrCat("K=", k, " decides the answer at L=256"));
      if (request.submit() && k == 16) p->set_run_id(41);
    }
    return d;
  }

  grpc::Status ProposeRuns(grpc::ServerContext* context,
                           const xmod::v1::ProposeRunsRequest* request,
                           xmod::v1::DesignDecision* decision) override {
    Record(context);
    absl::MutexLock lock(&mu_);
    last_propose_ = *request;
    *decision = Decision(*request);
    return grpc::Status::OK;
  }

  grpc::Status ListDecisions(grpc::ServerContext* context,
                             const xmod::v1::ListDecisionsRequest* request,
                             xmod::v1::ListDecisionsResponse* response) override {
    Record(context);
    if (request->sweep_id() == 7) {
      xmod::v1::ProposeRunsRequest asked;
      asked.set_sweep_id(7);
      *response->add_decisions() = Decision(asked);
    }
    return grpc::Status::OK;
  }

  grpc::Status CreateStudy(grpc::ServerContext* context,
                           const xmod::v1::CreateStudyRequest* request,
                           xmod::v1::Study* study) override {
    Record(context);
    absl::MutexLock lock(&mu_);
    last_create_study_ = *request;
    study->set_id(3);
    *study->mutable_spec() = request->spec();
    for (xmod::v1::StudyMember& m : *study->mutable_spec()->mutable_members()) {
      if (m.sweep_id() == 0) m.set_sweep_id(9);
    }
    // As the coordinator resolves them (coordinator/fitting/studies.h): unset fit settings
    // are the member sweeps' (here the B.4 sweeps' seed 7 and 200 refits).
    if (!study->spec().has_seed()) study->mutable_spec()->set_seed(7);
    if (!study->spec().has_bootstrap_samples()) {
      study->mutable_spec()->set_bootstrap_samples(200);
    }
    return grpc::Status::OK;
  }

  grpc::Status GetStudy(grpc::ServerContext* context, const xmod::v1::GetStudyRequest* request,
                        xmod::v1::Study* study) override {
    Record(context);
    if (request->name() != "b4") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("study '", request->name(), "' not found"));
    }
    *study = B4Study();
    return grpc::Status::OK;
  }

  grpc::Status ListStudies(grpc::ServerContext* context, const xmod::v1::ListStudiesRequest*,
                           xmod::v1::ListStudiesResponse* response) override {
    Record(context);
    *response->add_studies() = B4Study();
    return grpc::Status::OK;
  }

  // Run 2's history: submitted by alice, cancelled by the admin ops; a lost lease (the
  // coordinator's own). Other runs and sweeps have none.
  grpc::Status ListEvents(grpc::ServerContext* context, const xmod::v1::ListEventsRequest* request,
                          xmod::v1::ListEventsResponse* response) override {
    Record(context);
    if (request->run_id() != 2 && request->sweep_id() != 7) return grpc::Status::OK;
    const auto add = [&](int64_t id, const char* kind, const char* text, const char* actor) {
      xmod::v1::Event* e = response->add_events();
      e->set_id(id);
      e->set_time_unix_ms(1700000000000 + id);
      e->set_kind(kind);
      e->set_sweep_id(7);
      e->set_run_id(2);
      e->set_text(text);
      if (actor != nullptr) e->set_actor(actor);
    };
    add(3, "run_cancelled", "", "ops");
    add(2, "attempt_lost", "lease expired on w1", nullptr);
    add(1, "sweep_submitted", "demo: 3 runs", "alice");
    if (request->limit() == 2) {
      response->mutable_events()->DeleteSubrange(2, 1);
      response->set_next_before_id(2);
    }
    return grpc::Status::OK;
  }

  static xmod::v1::Study B4Study() {
    xmod::v1::Study study;
    study.set_id(3);
    study.mutable_spec()->set_name("b4");
    int64_t id = 3;
    for (const char* role : {"kxl", "nact", "axk"}) {
      xmod::v1::StudyMember* m = study.mutable_spec()->add_members();
      m->set_sweep_id(id++);
      m->set_sweep_name(absl::StrCat("paper-b4-", role));
      m->set_role(role);
    }
    return study;
  }

  xmod::v1::CreateStudyRequest last_create_study() {
    absl::MutexLock lock(&mu_);
    return last_create_study_;
  }
  xmod::v1::PredictRequest last_predict() {
    absl::MutexLock lock(&mu_);
    return last_predict_;
  }
  xmod::v1::ProposeRunsRequest last_propose() {
    absl::MutexLock lock(&mu_);
    return last_propose_;
  }
  xmod::v1::RecommendRequest last_recommend() {
    absl::MutexLock lock(&mu_);
    return last_recommend_;
  }

  void SetWatchEvents(std::vector<xmod::v1::WatchSweepEvent> events, int drop_first = 0) {
    absl::MutexLock lock(&mu_);
    watch_events_ = std::move(events);
    drop_next_watches_ = drop_first;
  }
  xmod::v1::SubmitSweepRequest last_submit() {
    absl::MutexLock lock(&mu_);
    return last_submit_;
  }
  int submits() {
    absl::MutexLock lock(&mu_);
    return submits_;
  }
  xmod::v1::ListRunsRequest last_list_runs() {
    absl::MutexLock lock(&mu_);
    return last_list_runs_;
  }
  std::string last_authorization() {
    absl::MutexLock lock(&mu_);
    return last_authorization_;
  }

 private:
  void Record(grpc::ServerContext* context) {
    auto it = context->client_metadata().find("authorization");
    absl::MutexLock lock(&mu_);
    last_authorization_ = it == context->client_metadata().end()
                              ? ""
                              : std::string(it->second.data(), it->second.size());
  }

  absl::Mutex mu_;
  xmod::v1::SubmitSweepRequest last_submit_;
  int submits_ = 0;
  xmod::v1::ListRunsRequest last_list_runs_;
  std::vector<xmod::v1::WatchSweepEvent> watch_events_;
  int drop_next_watches_ = 0;
  xmod::v1::PredictRequest last_predict_;
  xmod::v1::RecommendRequest last_recommend_;
  xmod::v1::ProposeRunsRequest last_propose_;
  xmod::v1::CreateStudyRequest last_create_study_;
  std::string last_authorization_;
};

struct Result {
  int code;
  std::string out;
  std::string err;
};

class CommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    addr_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override { server_->Shutdown(); }

  Result Xmodctl(std::vector<std::string> args, bool tty = false, int columns = 0) {
    args.insert(args.begin(), {"xmodctl", "--addr", addr_});
    std::ostringstream out, err;
    int code = RunXmodctl(args, Io{&out, &err, tty, columns});
    return {code, out.str(), err.str()};
  }

  // The same with `stdin_text` on standard input.
  Result XmodctlWithStdin(std::vector<std::string> args, const std::string& stdin_text) {
    args.insert(args.begin(), {"xmodctl", "--addr", addr_});
    std::ostringstream out, err;
    std::istringstream in(stdin_text);
    Io io{&out, &err};
    io.in = &in;
    int code = RunXmodctl(args, io);
    return {code, out.str(), err.str()};
  }

  std::string WriteSpec(const std::string& name, const std::string& contents) {
    std::string path = absl::StrCat(::testing::TempDir(), "/", name);
    EXPECT_TRUE(WriteFileAtomic(path, contents).ok());
    return path;
  }

  FakeCoordinator fake_;
  std::unique_ptr<grpc::Server> server_;
  std::string addr_;
};

constexpr char kSpec[] = R"pb(
  name: "demo"
  grids {
    archs: [ DENSE, XMOD ]
    backbones: "cpu-d128"
    seq_lens: 256
    ks: 4
    as: 1
  }
  training { flop_budget: 3e12 seq_len: 256 }
)pb";

TEST_F(CommandsTest, SubmitPrintsSweepIdAndRuns) {
  Result r = Xmodctl({"--token_file", WriteSpec("token", "s3cret\n"), "sweep", "submit",
                      WriteSpec("demo.textpb", kSpec)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Submitted sweep 7 (\"demo\") with 2 runs"));
  EXPECT_THAT(r.out, HasSubstr("xmod-cpu-d128-L256-K4-A1"));
  EXPECT_THAT(r.out, HasSubstr("2.64M"));    // total params
  EXPECT_THAT(r.out, HasSubstr("3.00e12"));  // budget
  xmod::v1::SubmitSweepRequest sent = fake_.last_submit();
  EXPECT_FALSE(sent.dry_run());
  EXPECT_EQ(sent.spec().name(), "demo");
  EXPECT_EQ(sent.spec().grids(0).archs_size(), 2);
  EXPECT_EQ(fake_.last_authorization(), "Bearer s3cret");
}

TEST_F(CommandsTest, SecretsNeverComeFromTheCommandLine) {
  Result r = Xmodctl({"--token", "s3cret", "sweep", "list"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--token is no longer accepted"));
  EXPECT_EQ(fake_.last_authorization(), "");
  setenv("XMOD_TOKEN", "from-env", 1);
  r = Xmodctl({"sweep", "list"});
  unsetenv("XMOD_TOKEN");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(fake_.last_authorization(), "Bearer from-env");
  r = Xmodctl({"--token_file", "/nonexistent/token", "sweep", "list"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/token"));
  // TLS to a plaintext server fails to connect; a missing CA file is a usage error.
  r = Xmodctl({"--tls_ca", "/nonexistent/ca.pem", "sweep", "list"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tls_ca: cannot read /nonexistent/ca.pem"));
}

TEST_F(CommandsTest, SubmitJsonDryRun) {
  Result r = Xmodctl({"sweep", "submit", "--dry_run",
                      WriteSpec("demo.json", R"({"name": "j", "grids": [{"ks": [2]}]})")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fake_.last_submit().dry_run());
  EXPECT_EQ(fake_.last_submit().spec().grids(0).ks(0), 2);
  EXPECT_THAT(r.out, HasSubstr("Dry run: sweep \"j\" expands to 2 runs, 1 in-range X-MoD "
                               "observations (nothing stored)"));
  // Tokens the budget buys, 3e12 / (3 x 1.5e6), and those per active-equivalent parameter
  // (cpu-d128: N_act = 2.10M with embeddings).
  EXPECT_THAT(r.out, HasSubstr("TOKENS/N_ACT"));
  EXPECT_THAT(r.out, HasSubstr("667K"));
  EXPECT_THAT(r.out, HasSubstr("0.318"));
  // The forecast, each figure with its source.
  EXPECT_THAT(r.out, HasSubstr("Forecast: 0 GPU-hours and 0.0741 CPU slot-hours (1 of 2 runs "
                               "with no finished run like them to go by); on the 0 GPU and 2 "
                               "CPU slots heard from in the last 10 minutes, about 4m27s of "
                               "wall time if it ran alone"));
  EXPECT_THAT(r.out, HasSubstr("median of 2 finished runs of the same model, cpu-d128 DENSE"));
  EXPECT_THAT(r.out, HasSubstr("no finished run of cpu-d128 XMOD, L 256, auto to go by"));
  EXPECT_EQ(fake_.last_authorization(), "");
}

TEST_F(CommandsTest, SubmitReadsTheSpecFromStandardInput) {
  // "-" reads standard input; the syntax comes from the contents.
  Result json = XmodctlWithStdin({"sweep", "submit", "--dry_run", "-"},
                                 R"(  {"name": "piped", "grids": [{"ks": [2]}]})");
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(fake_.last_submit().spec().name(), "piped");
  Result text = XmodctlWithStdin({"sweep", "submit", "-"}, "name: \"texty\" grids { ks: [3] }");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(fake_.last_submit().spec().grids(0).ks(0), 3);
  Result broken = XmodctlWithStdin({"sweep", "submit", "-"}, "name: \"b\" grids {");
  EXPECT_EQ(broken.code, 2);
  EXPECT_THAT(broken.err, HasSubstr("<stdin>:1:"));
}

TEST_F(CommandsTest, SubmitRefusedSpecPrintsTheServersFieldAndExits2) {
  Result r =
      Xmodctl({"sweep", "submit", WriteSpec("bad.textpb", "name: \"b\" grids { ks: [2, 0] }")});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "xmodctl: grids[0].ks[1]: K must be >= 1\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(CommandsTest, SubmitSyntaxErrorNeverReachesTheServer) {
  std::string path = WriteSpec("broken.json", "{\n \"name\": \"b\",\n \"grids\": [}\n");
  Result r = Xmodctl({"sweep", "submit", path});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(path, ":3:12: ")));
  EXPECT_EQ(fake_.submits(), 0);
}

TEST_F(CommandsTest, SweepListInEveryFormat) {
  Result table = Xmodctl({"sweep", "list"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("ID  NAME         STATE   RUNS  QUEUED  RUNNING  SUCCEEDED"));
  EXPECT_THAT(table.out, HasSubstr(" 7  demo, small  active     9       3        2          4"));
  Result csv = Xmodctl({"sweep", "list", "--output", "csv"});
  EXPECT_THAT(csv.out, HasSubstr("id,name,state,runs,queued,running,succeeded,failed,cancelled,"
                                 "created\n7,\"demo, small\",active,9,3,2,4,0,0,\n"));
  // JSON is the ListSweepsResponse (proto field names, defaults printed), not the table.
  Result json = Xmodctl({"-o", "json", "sweep", "list"});
  xmod::v1::ListSweepsResponse listed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &listed).ok()) << json.out;
  ASSERT_EQ(listed.sweeps_size(), 1);
  EXPECT_EQ(listed.sweeps(0).name(), "demo, small");
  EXPECT_EQ(listed.sweeps(0).run_counts().at("SUCCEEDED"), 4);
  EXPECT_THAT(json.out, HasSubstr("\"state\": \"SWEEP_ACTIVE\""));
  EXPECT_THAT(json.out, HasSubstr("\"created_unix_ms\": \"0\""));
}

TEST_F(CommandsTest, RunsListPassesFilters) {
  Result r = Xmodctl({"runs", "list", "--sweep", "7", "--state", "running,FAILED"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto sent = fake_.last_list_runs();
  EXPECT_EQ(sent.sweep_id(), 7);
  ASSERT_EQ(sent.states_size(), 2);
  EXPECT_EQ(sent.states(0), xmod::v1::RUNNING);
  EXPECT_EQ(sent.states(1), xmod::v1::FAILED);
  EXPECT_THAT(r.out, HasSubstr("running"));
  EXPECT_THAT(r.out, HasSubstr("50%"));
  EXPECT_THAT(r.out, HasSubstr("4.1235"));
  Result bad = Xmodctl({"runs", "list", "--state", "sleeping"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--state"));
}

TEST_F(CommandsTest, RunsListSendsTheQueryAndPage) {
  Result r =
      Xmodctl({"runs",        "list", "--sweep",      "7",   "--arch",  "xmod,DENSE", "--K",
               "2,4",         "--A",  "0.5",          "--L", "256",     "--backbone", "tiny",
               "--label",     "kxl",  "--name",       "-s3", "--sort",  "val_loss",   "--desc",
               "--page_size", "50",   "--page_token", "abc", "--group", "replicates"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto sent = fake_.last_list_runs();
  const auto& f = sent.filters();
  ASSERT_EQ(f.archs_size(), 2);
  EXPECT_EQ(f.archs(0), xmod::v1::XMOD);
  EXPECT_EQ(f.archs(1), xmod::v1::DENSE);
  EXPECT_THAT(std::vector<int>(f.ks().begin(), f.ks().end()), ::testing::ElementsAre(2, 4));
  ASSERT_EQ(f.as_size(), 1);
  EXPECT_EQ(f.as(0), 0.5);
  EXPECT_EQ(f.seq_lens(0), 256);
  EXPECT_EQ(f.backbones(0), "tiny");
  EXPECT_EQ(f.labels(0), "kxl");
  EXPECT_EQ(f.name_contains(), "-s3");
  EXPECT_EQ(sent.sort(), xmod::v1::RUN_SORT_VAL_LOSS);
  EXPECT_TRUE(sent.descending());
  EXPECT_EQ(sent.page_size(), 50);
  EXPECT_EQ(sent.page_token(), "abc");
  EXPECT_EQ(sent.group(), xmod::v1::RUN_GROUPING_REPLICATES);
  EXPECT_THAT(r.out, HasSubstr("CONFIGURATION"));  // the groups' table
  for (const auto& [args, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--sort", "flavour"}, "--sort"},
           {{"--arch", "transformer"}, "--arch"},
           {{"--group", "seeds"}, "--group"}}) {
    std::vector<std::string> argv = {"runs", "list"};
    argv.insert(argv.end(), args.begin(), args.end());
    Result bad = Xmodctl(argv);
    EXPECT_EQ(bad.code, 2) << flag;
    EXPECT_THAT(bad.err, HasSubstr(flag));
  }
}

TEST_F(CommandsTest, RunShowHasAttemptsAndCheckpoints) {
  Result r = Xmodctl({"run", "show", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Attempts"));
  EXPECT_THAT(r.out, HasSubstr("loss is NaN"));
  EXPECT_THAT(r.out, HasSubstr("/ckpt/run2/step40.pt"));
  Result missing = Xmodctl({"run", "show", "99"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err, "xmodctl: run 99 not found\n");
}

TEST_F(CommandsTest, RunShowAndEventsSayWhoChangedWhat) {
  Result r = Xmodctl({"run", "show", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Events, newest first (3)"));
  EXPECT_THAT(r.out, HasSubstr("run_cancelled"));
  EXPECT_THAT(r.out, HasSubstr("ops"));
  EXPECT_THAT(r.out, HasSubstr("coordinator"));  // the lost lease: no actor
  Result page = Xmodctl({"events", "--run", "2", "--limit", "2"});
  ASSERT_EQ(page.code, 0) << page.err;
  EXPECT_THAT(page.out, HasSubstr("(next page: --before_id 2)"));
  EXPECT_THAT(page.out, Not(HasSubstr("sweep_submitted")));
  Result json = Xmodctl({"events", "--sweep", "7", "-o", "json"});
  ASSERT_EQ(json.code, 0) << json.err;
  xmod::v1::ListEventsResponse events;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &events).ok()) << json.out;
  ASSERT_EQ(events.events_size(), 3);
  EXPECT_EQ(events.events(2).actor(), "alice");
  EXPECT_FALSE(events.events(1).has_actor());
}

TEST_F(CommandsTest, RunShowSaysWhyASucceededRunEndedShortOfItsBudget) {
  Result r = Xmodctl({"run", "show", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("100%"));
  EXPECT_THAT(r.out, HasSubstr("ended at step 998 of 998: budget reached in the last whole step "
                               "(2.99e12 of 3.00e12 FLOPs)"));
  // A run that spent its whole budget needs no note.
  Result failed = Xmodctl({"run", "show", "2"});
  EXPECT_THAT(failed.out, Not(HasSubstr("ended at step")));
}

// Each zero-shot metric with its standard error beside it ("-" where the harness reports
// none: acc_norm and its error for LAMBADA, ppl for a multiple-choice task).
TEST_F(CommandsTest, RunShowHasZeroShotResultsWithStandardErrors) {
  Result r = Xmodctl({"run", "show", "5"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr("TASK       N     ACC  ACC_STDERR  ACC_NORM  ACC_NORM_STDERR    PPL  "
                        "PPL_STDERR\n"
                        "gcide    500  0.4375      0.0222    0.4375           0.0222      -  "
                        "         -\n"
                        "lambada   96   0.125      0.0331         -                -  812.5  "
                        "     97.25\n"));
  Result csv = Xmodctl({"run", "show", "5", "-o", "csv"});
  EXPECT_THAT(csv.out, HasSubstr("task,n,acc,acc_stderr,acc_norm,acc_norm_stderr,ppl,ppl_stderr\n"
                                 "gcide,500,0.4375,0.0222,0.4375,0.0222,,\n"));
}

TEST_F(CommandsTest, RunShowSaysWhyAQueuedRunWaits) {
  Result r = Xmodctl({"run", "show", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("waiting", std::string(2, ' '))));
  EXPECT_THAT(r.out, HasSubstr(kPortReason));
  Result json = Xmodctl({"run", "show", "3", "-o", "json"});
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_THAT(json.out, HasSubstr(absl::StrCat("\"pending_reason\": \"", kPortReason, "\"")));
}

TEST_F(CommandsTest, QueryJsonIsTheResponse) {
  Result r = Xmodctl({"query", "SELECT name, K, val_loss FROM run_summary", "--output", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  xmod::v1::QueryResponse response;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &response).ok()) << r.out;
  ASSERT_EQ(response.rows_size(), 2);
  EXPECT_EQ(response.rows(0).values(2), "3.912345");
  EXPECT_THAT(r.out, HasSubstr("\"columns\": [\n  \"name\",\n  \"K\",\n  \"val_loss\"\n ]"));
  EXPECT_THAT(r.out, HasSubstr("\"truncated\": false"));
  Result table = Xmodctl({"query", "SELECT 1"});
  EXPECT_THAT(table.out,
              HasSubstr("NAME     K  VAL_LOSS\nxmod-K4  4    3.9123\ndense    -      3.85\n"));
  Result refused = Xmodctl({"query", "DELETE FROM runs"});
  EXPECT_EQ(refused.code, 2);
  EXPECT_THAT(refused.err, HasSubstr("only SELECT"));
}

TEST_F(CommandsTest, FitShowPrintsParametersAndCv) {
  Result r = Xmodctl({"fit", "show", "7"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("r2_delta      0.9870"));
  EXPECT_THAT(r.out, HasSubstr("rho_k   1.25"));
  EXPECT_THAT(r.out, HasSubstr("at_bound      eta_l"));
  EXPECT_THAT(r.out, HasSubstr("L=512  0.00420  6"));
  Result json = Xmodctl({"fit", "show", "7", "-o", "json"});
  EXPECT_THAT(json.out, HasSubstr("\"rho_k\": 1.25"));
  EXPECT_THAT(json.out, HasSubstr("\"study_id\": \"0\""));  // defaults printed
}

TEST_F(CommandsTest, FitPredictSendsEveryCombination) {
  Result r = Xmodctl({"fit", "predict", "7", "--C", "1e20", "--L", "4096,32768", "--backbone",
                      "556M", "--K", "4", "--K", "8", "--A", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto sent = fake_.last_predict();
  EXPECT_EQ(sent.sweep_id(), 7);
  ASSERT_EQ(sent.points_size(), 4);  // 1 C x 2 L x 2 K x 1 A
  EXPECT_DOUBLE_EQ(sent.points(0).flops(), 1e20);
  EXPECT_EQ(sent.points(0).seq_len(), 4096);
  EXPECT_EQ(sent.points(1).k(), 8);
  EXPECT_EQ(sent.points(3).seq_len(), 32768);
  EXPECT_DOUBLE_EQ(sent.points(3).a(), 4);
  EXPECT_EQ(sent.points(3).backbone(), "556M");
  EXPECT_THAT(r.out, HasSubstr("1.00e20  32768  556M      8  4  -0.0800  3.4200"));
  Result missing =
      Xmodctl({"fit", "predict", "7", "--C", "1e20", "--L", "4096", "--backbone", "556M"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--K"));
}

TEST_F(CommandsTest, FitRecommendPassesTheCapAndShowsTheBest) {
  Result r = Xmodctl({"fit", "recommend", "7", "--C", "1e20", "--L", "32768", "--backbone", "556M",
                      "--max_params", "3B", "--ks", "2,4,8", "--top", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto sent = fake_.last_recommend();
  EXPECT_DOUBLE_EQ(sent.max_total_params(), 3e9);
  EXPECT_EQ(sent.ks_size(), 3);
  EXPECT_EQ(sent.as_size(), 0);
  EXPECT_THAT(r.out, HasSubstr("K  A    DELTA  TOTAL_PARAMS  KHAT_A3\n"
                               "4  2  -0.0321         2.64B     4.95\n"));
  EXPECT_THAT(r.out, HasSubstr("Best 2 of 3 candidates"));
  EXPECT_THAT(r.out, HasSubstr("-0.0220"));       // second candidate (K = 8)
  EXPECT_THAT(r.out, Not(HasSubstr("-0.0280")));  // third candidate (K = 2), cut by --top
}

TEST_F(CommandsTest, FitProposeSendsTheTargetsAndShowsTheRankedProposals) {
  Result r = Xmodctl({"fit", "propose", "7", "--target", "5e11:256:cpu-d96", "--count", "2",
                      "--compute_left", "3e12", "--submit"});
  ASSERT_EQ(r.code, 0) << r.err;
  xmod::v1::ProposeRunsRequest sent = fake_.last_propose();
  EXPECT_EQ(sent.sweep_id(), 7);
  ASSERT_EQ(sent.targets_size(), 1);
  EXPECT_DOUBLE_EQ(sent.targets(0).flops(), 5e11);
  EXPECT_EQ(sent.targets(0).seq_len(), 256);
  EXPECT_EQ(sent.targets(0).backbone(), "cpu-d96");
  EXPECT_EQ(sent.count(), 2);
  EXPECT_DOUBLE_EQ(sent.compute_left(), 3e12);
  EXPECT_TRUE(sent.submit());
  EXPECT_THAT(r.out, HasSubstr("K=16 decides the answer at L=256"));
  EXPECT_THAT(r.out, HasSubstr("C=5.00e11 L=256 cpu-d96  8  2  -0.0431"));
  EXPECT_THAT(r.out, HasSubstr("75%"));
  EXPECT_THAT(r.out, HasSubstr("41"));  // the queued run

  Result bad = Xmodctl({"fit", "propose", "7", "--target", "5e11:cpu-d96"});
  EXPECT_NE(bad.code, 0);
  EXPECT_THAT(bad.err, HasSubstr("--target: '5e11:cpu-d96' is not C:L:BACKBONE"));
}

TEST_F(CommandsTest, SweepShowIncludesTheLatestDesignDecision) {
  Result r = Xmodctl({"sweep", "show", "7"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Latest of 1 design decisions"));
  EXPECT_THAT(r.out, HasSubstr("K=4 decides the answer at L=256"));
}

TEST_F(CommandsTest, StudyCreateFromFlagsOrAFile) {
  Result r = Xmodctl({"study", "create", "b4", "--member", "kxl=3", "--member",
                      "nact=paper-b4-nact", "--seed", "7", "--bootstrap_samples", "20"});
  ASSERT_EQ(r.code, 0) << r.err;
  xmod::v1::CreateStudyRequest sent = fake_.last_create_study();
  EXPECT_EQ(sent.spec().name(), "b4");
  ASSERT_EQ(sent.spec().members_size(), 2);
  EXPECT_EQ(sent.spec().members(0).sweep_id(), 3);
  EXPECT_EQ(sent.spec().members(0).role(), "kxl");
  EXPECT_EQ(sent.spec().members(1).sweep_name(), "paper-b4-nact");
  EXPECT_EQ(sent.spec().members(1).role(), "nact");
  EXPECT_EQ(sent.spec().seed(), 7u);
  EXPECT_EQ(sent.spec().bootstrap_samples(), 20);
  EXPECT_THAT(r.out, HasSubstr("Created study 3 (\"b4\") over 2 sweeps"));
  EXPECT_THAT(r.out, HasSubstr("9  paper-b4-nact  nact"));
  EXPECT_THAT(r.out, HasSubstr("seed                   7  given\n"));
  EXPECT_THAT(r.out, HasSubstr("bootstrap_samples     20  given\n"));

  // The README's command: no fit settings sent, so the coordinator gives the member sweeps'
  // and the command prints what the study will fit with.
  r = Xmodctl(
      {"study", "create", "b4", "--member", "kxl=1", "--member", "nact=2", "--member", "axk=3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fake_.last_create_study().spec().has_seed());
  EXPECT_FALSE(fake_.last_create_study().spec().has_bootstrap_samples());
  EXPECT_THAT(r.out, HasSubstr("Fit settings of the study"));
  EXPECT_THAT(r.out, HasSubstr("seed                   7  the member sweeps' fit plans\n"));
  EXPECT_THAT(r.out, HasSubstr("bootstrap_samples    200  the member sweeps' fit plans\n"));

  const std::string file =
      WriteSpec("study.textpb", R"pb(name: "from-file"
                                     members { sweep_name: "x" role: "axk" })pb");
  r = Xmodctl({"study", "create", "-f", file, "--member", "design=4"});
  ASSERT_EQ(r.code, 0) << r.err;
  sent = fake_.last_create_study();
  EXPECT_EQ(sent.spec().name(), "from-file");
  ASSERT_EQ(sent.spec().members_size(), 2);
  EXPECT_EQ(sent.spec().members(1).role(), "design");

  r = Xmodctl({"study", "create", "b4", "--member", "kxl=3", "--dry_run"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fake_.last_create_study().dry_run());
  EXPECT_THAT(r.out, HasSubstr("Dry run: study (\"b4\") over 1 sweeps: 0 in-range X-MoD"));
  EXPECT_THAT(r.out, HasSubstr("(nothing stored)"));

  r = Xmodctl({"study", "create", "b4", "--member", "kxl"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--member: 'kxl' is not ROLE=SWEEP"));
}

TEST_F(CommandsTest, StudyListShowAndTheStudysFit) {
  Result r = Xmodctl({"study", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("kxl=3 nact=4 axk=5"));
  r = Xmodctl({"study", "show", "b4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("5  paper-b4-axk   axk"));
  r = Xmodctl({"study", "show", "b5"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("study 'b5' not found"));

  r = Xmodctl({"fit", "show", "--study", "b4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("study +3"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("stages +by sweep"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("e_stage2 +0.07000"));
  r = Xmodctl({"fit", "show", "7"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("stages +by A"));
  r = Xmodctl({"fit", "show", "7", "--study", "b4"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--study: give a sweep id or --study NAME, not both"));
  r = Xmodctl({"fit", "show"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("SWEEP: give a sweep id or --study NAME"));

  r = Xmodctl({"fit", "predict", "--study", "b4", "--C", "1e20", "--L", "4096", "--backbone",
               "556M", "--K", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(fake_.last_predict().study(), "b4");
  EXPECT_EQ(fake_.last_predict().sweep_id(), 0);
  r = Xmodctl(
      {"fit", "recommend", "--study", "b4", "--C", "1e20", "--L", "32768", "--backbone", "556M"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(fake_.last_recommend().study(), "b4");
}

std::vector<xmod::v1::WatchSweepEvent> WatchScript(xmod::v1::SweepState final_state) {
  auto sweep = [](xmod::v1::SweepState state, int queued, int running, int done, int failed) {
    xmod::v1::Sweep s;
    s.set_id(7);
    s.set_name("demo");
    s.set_state(state);
    (*s.mutable_run_counts())["QUEUED"] = queued;
    (*s.mutable_run_counts())["RUNNING"] = running;
    (*s.mutable_run_counts())["SUCCEEDED"] = done;
    (*s.mutable_run_counts())["FAILED"] = failed;
    return s;
  };
  std::vector<xmod::v1::WatchSweepEvent> events(4);
  events[0].set_snapshot(true);
  *events[0].mutable_sweep() = sweep(xmod::v1::SWEEP_ACTIVE, 2, 0, 0, 0);
  *events[0].add_runs() = MakeRun(1, "dense", xmod::v1::QUEUED, 0, 1e12);
  *events[0].add_runs() = MakeRun(2, "xmod-K4", xmod::v1::QUEUED, 0, 1e12);
  *events[1].mutable_sweep() = sweep(xmod::v1::SWEEP_ACTIVE, 1, 1, 0, 0);
  Run running = MakeRun(1, "dense", xmod::v1::RUNNING, 5e11, 1e12);
  running.mutable_progress()->set_step(120);
  running.mutable_progress()->set_train_loss(3.5);
  running.mutable_progress()->set_tokens_per_second(12345);
  *events[1].add_runs() = running;
  *events[2].mutable_sweep() = sweep(xmod::v1::SWEEP_ACTIVE, 0, 1, 1, 0);
  Run done = MakeRun(1, "dense", xmod::v1::SUCCEEDED, 1e12, 1e12);
  done.mutable_progress()->set_val_loss(3.25);
  *events[2].add_runs() = done;
  bool failed = final_state == xmod::v1::SWEEP_FAILED;
  *events[3].mutable_sweep() = sweep(final_state, 0, 0, failed ? 1 : 2, failed ? 1 : 0);
  Run last = MakeRun(2, "xmod-K4", failed ? xmod::v1::FAILED : xmod::v1::SUCCEEDED,
                     failed ? 2e11 : 1e12, 1e12);
  if (failed) last.set_error("trainer exited 1: loss is NaN\nstack...");
  *events[3].add_runs() = last;
  return events;
}

TEST_F(CommandsTest, WatchRendersProgressUntilTheSweepIsDone) {
  fake_.SetWatchEvents(WatchScript(xmod::v1::SWEEP_DONE));
  Result r = Xmodctl({"sweep", "watch", "7"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("\x1b[")));
  EXPECT_THAT(r.out, HasSubstr("sweep 7 demo: active  0 running  2 queued"));
  EXPECT_THAT(r.out, HasSubstr("dense    running    [##########..........]  50%  step    120  "
                               "loss  3.5000  val       -  12.3k tok/s\n"));
  EXPECT_THAT(r.out, HasSubstr("dense    succeeded  [####################] 100%"));
  EXPECT_THAT(r.out, HasSubstr("val  3.2500"));
  EXPECT_THAT(r.out, HasSubstr("sweep 7 demo: done  0 running  0 queued  2 succeeded  0 failed"));
  // Plain mode appends lines for changes only: summary + 2 runs for the snapshot, then a
  // summary and one run line for each of the three updates.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3 + 2 + 2 + 2);
}

TEST_F(CommandsTest, WatchJsonPrintsOneEventALine) {
  std::vector<xmod::v1::WatchSweepEvent> script = WatchScript(xmod::v1::SWEEP_DONE);
  fake_.SetWatchEvents(script);
  Result r = Xmodctl({"sweep", "watch", "7", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), script.size()) << r.out;
  for (size_t i = 0; i < lines.size(); ++i) {
    xmod::v1::WatchSweepEvent event;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[i], &event).ok()) << lines[i];
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(event, script[i])) << lines[i];
  }
  EXPECT_THAT(lines[0], HasSubstr("\"snapshot\":true"));
}

TEST_F(CommandsTest, WatchExitsNonZeroWhenARunFailed) {
  fake_.SetWatchEvents(WatchScript(xmod::v1::SWEEP_FAILED));
  Result r = Xmodctl({"sweep", "watch", "7"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("error: trainer exited 1: loss is NaN"));
  EXPECT_EQ(r.err, "xmodctl: sweep 7 ended failed: xmod-K4 (failed)\n");
}

TEST_F(CommandsTest, WatchRedrawsInPlaceOnATerminal) {
  fake_.SetWatchEvents(WatchScript(xmod::v1::SWEEP_DONE));
  Result r = Xmodctl({"sweep", "watch", "7"}, /*tty=*/true);
  ASSERT_EQ(r.code, 0) << r.err;
  // Four redraws of a 4-line table (summary, header, two runs): the last three move the
  // cursor up 4 lines first and step over the lines that did not change.
  size_t ups = 0;
  for (size_t at = r.out.find("\x1b[4A"); at != std::string::npos;
       at = r.out.find("\x1b[4A", at + 1)) {
    ++ups;
  }
  EXPECT_EQ(ups, 3);
  EXPECT_THAT(r.out, HasSubstr("\r\x1b[2KNAME     STATE      PROGRESS"));
  EXPECT_THAT(r.out, HasSubstr("\r\x1b[2Ksweep 7 demo: done"));
  EXPECT_THAT(r.out, HasSubstr("\x1b[1B"));
}

TEST_F(CommandsTest, WatchKeepsTheLineLogWithNoRedraw) {
  fake_.SetWatchEvents(WatchScript(xmod::v1::SWEEP_DONE));
  Result r = Xmodctl({"sweep", "watch", "7", "--no_redraw"}, /*tty=*/true);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("\x1b[")));
  EXPECT_THAT(r.out, HasSubstr("dense    succeeded  [####################] 100%"));
}

// xmodctl itself (XMOD_BIN_DIR) against the fake, its stdout a pseudo-terminal of 100 x 24
// (forkpty) or a pipe: the binary's own choice of redraw or line log.
TEST_F(CommandsTest, WatchRedrawsOnlyWhenStdoutIsATerminal) {
  const char* bin = std::getenv("XMOD_BIN_DIR");
  ASSERT_NE(bin, nullptr) << "run through ctest (XMOD_BIN_DIR)";
  const auto run = [&](bool terminal, std::vector<std::string> args) {
    fake_.SetWatchEvents(WatchScript(xmod::v1::SWEEP_DONE));
    args.insert(args.begin(), {absl::StrCat(bin, "/xmodctl"), "--addr", addr_});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fd = -1;
    int pipe_fds[2] = {-1, -1};
    pid_t pid;
    if (terminal) {
      winsize size{24, 100, 0, 0};
      pid = forkpty(&fd, nullptr, nullptr, &size);
    } else {
      EXPECT_EQ(pipe(pipe_fds), 0);
      pid = fork();
      if (pid == 0) dup2(pipe_fds[1], STDOUT_FILENO);
      fd = pipe_fds[0];
    }
    if (pid == 0) {
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (!terminal) close(pipe_fds[1]);
    std::string out;
    char buffer[4096];
    // The terminal's master reads EIO once the child closed its side.
    for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) out.append(buffer, n);
    close(fd);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    return out;
  };
  const std::string terminal = run(true, {"sweep", "watch", "7"});
  EXPECT_THAT(terminal, HasSubstr("\x1b[4A"));
  EXPECT_THAT(terminal, HasSubstr("NAME     STATE      PROGRESS"));
  const std::string piped = run(false, {"sweep", "watch", "7"});
  EXPECT_THAT(piped, Not(HasSubstr("\x1b[")));
  EXPECT_THAT(piped, HasSubstr("dense    succeeded  [####################] 100%"));
  EXPECT_THAT(run(true, {"sweep", "watch", "7", "--no-redraw"}), Not(HasSubstr("\x1b[")));
}

TEST_F(CommandsTest, WatchCutsRedrawnLinesToTheTerminalWidth) {
  fake_.SetWatchEvents(WatchScript(xmod::v1::SWEEP_DONE));
  Result r = Xmodctl({"sweep", "watch", "7"}, /*tty=*/true, /*columns=*/40);
  ASSERT_EQ(r.code, 0) << r.err;
  // 39 characters after the "\r\x1b[2K" prefix, so no line wraps.
  EXPECT_THAT(r.out, HasSubstr("\r\x1b[2Ksweep 7 demo: done  0 running  0 queued\n"));
  EXPECT_THAT(r.out, HasSubstr("\r\x1b[2Kdense    succeeded  [##################\n"));
}

TEST_F(CommandsTest, WatchRedrawsWholeAfterTheTerminalIsResized) {
  fake_.SetWatchEvents(WatchScript(xmod::v1::SWEEP_DONE));
  std::ostringstream out, err;
  Io io{&out, &err, /*out_is_tty=*/true, /*tty_columns=*/100};
  int calls = 0;
  // 100 columns for the first two events, then 30.
  io.tty_size = [&calls](int* columns, int* rows) {
    *columns = ++calls <= 2 ? 100 : 30;
    *rows = 0;
    return true;
  };
  ASSERT_EQ(RunXmodctl({"xmodctl", "--addr", addr_, "sweep", "watch", "7"}, io), 0) << err.str();
  EXPECT_EQ(calls, 4);
  // The third frame: up over the 4 lines drawn, cleared down, drawn whole at 29 characters.
  EXPECT_THAT(out.str(), HasSubstr("\x1b[4A\r\x1b[J\r\x1b[2Ksweep 7 demo: active  1 runni\n"));
}

TEST_F(CommandsTest, WatchReconnectsWhenTheCoordinatorGoesAway) {
  fake_.SetWatchEvents(WatchScript(xmod::v1::SWEEP_DONE), /*drop_first=*/2);
  Result r = Xmodctl({"sweep", "watch", "7"});
  ASSERT_EQ(r.code, 0) << r.err;
  // Every (re)connect starts with a snapshot: three times the snapshot's summary line.
  size_t snapshots = 0;
  for (size_t at = r.out.find("2 queued"); at != std::string::npos;
       at = r.out.find("2 queued", at + 1)) {
    ++snapshots;
  }
  EXPECT_EQ(snapshots, 3);
  EXPECT_THAT(r.out, HasSubstr("sweep 7 demo: done"));
}

TEST_F(CommandsTest, WatchStreamEndingEarlyIsAnError) {
  auto events = WatchScript(xmod::v1::SWEEP_DONE);
  events.resize(2);
  fake_.SetWatchEvents(events);
  Result r = Xmodctl({"sweep", "watch", "7"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("ended before the sweep did"));
}

// xmodctl against a coordinator that requires TLS and client certificates (made with openssl
// for this test): only the right CA plus a client certificate connects.
TEST(CommandsTlsTest, TlsFlagsReachAMutualTlsServer) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/xmodctl-tls");
  ASSERT_EQ(std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'").c_str()), 0);
  ASSERT_TRUE(MakeTestCa(dir, "ca").ok());
  ASSERT_TRUE(MakeTestCert(dir, "ca", "server", "IP:127.0.0.1").ok());
  ASSERT_TRUE(MakeTestCert(dir, "ca", "client", "").ok());
  ServerTlsFiles tls;
  tls.cert_file = dir + "/server.pem";
  tls.key_file = dir + "/server.key";
  tls.client_ca_file = dir + "/ca.pem";
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = NewServerCredentials(tls);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  FakeCoordinator fake;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", *credentials, &port);
  builder.RegisterService(&fake);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_GT(port, 0);
  const auto xmodctl = [&](std::vector<std::string> flags) {
    std::vector<std::string> args = {"xmodctl", "--addr", absl::StrCat("127.0.0.1:", port),
                                     "--timeout", "10"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"sweep", "list"});
    std::ostringstream out, err;
    const int code = RunXmodctl(args, Io{&out, &err, false, 0});
    return std::make_pair(code, out.str() + err.str());
  };
  auto [code, text] = xmodctl({"--tls_ca", dir + "/ca.pem", "--tls_cert", dir + "/client.pem",
                               "--tls_key", dir + "/client.key"});
  EXPECT_EQ(code, 0) << text;
  EXPECT_THAT(text, HasSubstr("demo, small"));
  std::tie(code, text) = xmodctl({});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(text, HasSubstr("cannot reach the coordinator"));
  std::tie(code, text) = xmodctl({"--tls_ca", dir + "/ca.pem"});
  EXPECT_EQ(code, 1) << "no client certificate";
  server->Shutdown();
}

TEST(CommandsNoServerTest, ConnectionFailureNamesTheAddress) {
  std::ostringstream out, err;
  int code = RunXmodctl({"xmodctl", "--addr", "127.0.0.1:1", "--timeout", "5", "sweep", "list"},
                        Io{&out, &err, false});
  EXPECT_EQ(code, 1);
  std::string message = err.str();
  EXPECT_THAT(message, HasSubstr("cannot reach the coordinator at 127.0.0.1:1"));
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1);
}

TEST(CommandsNoServerTest, UsageErrorsExit2) {
  std::ostringstream out, err;
  EXPECT_EQ(RunXmodctl({"xmodctl", "sweep", "frobnicate"}, Io{&out, &err, false}), 2);
  EXPECT_EQ(RunXmodctl({"xmodctl"}, Io{&out, &err, false}), 2);
  EXPECT_EQ(RunXmodctl({"xmodctl", "--help"}, Io{&out, &err, false}), 0);
  EXPECT_THAT(out.str(), HasSubstr("sweep"));
}

}  // namespace
}  // namespace xmod::cli
