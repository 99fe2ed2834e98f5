// docs/security.md's table "What each scope may do" is what the coordinator does: this test
// reads the table and makes every call it lists as every scope, through real gRPC clients of
// an in-process coordinator, against work user alice owns:
//   yes  the call is allowed (any answer but PERMISSION_DENIED or UNAUTHENTICATED)
//   no   PERMISSION_DENIED
//   own  allowed on the caller's own work (alice; for a worker, its own registration and
//        attempts) and PERMISSION_DENIED on another's (bob acting on alice's work; worker w2
//        acting as w1)
//   any  allowed on another's work (the admin on alice's)
// Every method of both services must have a row, and every row a call here.
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/auth.h"
#include "coordinator/coordinator.h"
#include "coordinator/tests/test_util.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kBob[] = "bob-token-0123456789ab";
constexpr char kOps[] = "ops-token-0123456789abc";
constexpr char kViewer[] = "viewer-token-0123456789";
constexpr char kW1[] = "w1-token-0123456789abcd";
constexpr char kW2[] = "w2-token-0123456789abcd";
constexpr char kScopes[][8] = {"read", "user", "admin", "worker"};

// The table's rows: call name (backticks removed) -> the cell of each scope, in kScopes order.
std::map<std::string, std::vector<std::string>> ReadScopeTable() {
  const char* source = std::getenv("XMOD_SOURCE_DIR");
  EXPECT_NE(source, nullptr) << "XMOD_SOURCE_DIR";
  std::ifstream file(absl::StrCat(source == nullptr ? "." : source, "/docs/security.md"));
  std::map<std::string, std::vector<std::string>> rows;
  std::string line;
  bool in_table = false;
  while (std::getline(file, line)) {
    if (line == "| call | read | user | admin | worker |") {
      in_table = true;
      continue;
    }
    if (!in_table || absl::StartsWith(line, "| ---")) continue;
    if (!absl::StartsWith(line, "|")) break;
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    // "", call, read, user, admin, worker, ""
    EXPECT_EQ(cells.size(), 7u) << line;
    if (cells.size() != 7) continue;
    for (std::string& cell : cells) cell = std::string(absl::StripAsciiWhitespace(cell));
    rows[absl::StrReplaceAll(cells[1], {{"`", ""}})] = {cells[2], cells[3], cells[4], cells[5]};
  }
  EXPECT_FALSE(rows.empty()) << "no table \"| call | read | user | admin | worker |\"";
  return rows;
}

class ScopeTableTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("scope_table");
    CoordinatorOptions options = LoopbackOptions(dir_);
    options.tick_ms = 3'600'000;
    absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(
        options, absl::StrCat("user alice ", kAlice, "\nuser bob ", kBob, "\nadmin ops ", kOps,
                              "\nread viewer ", kViewer, "\nworker w1 ", kW1, "\nworker w2 ", kW2));
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(c->coordinator);
    stub_ = std::move(c->user);
    worker_ = std::move(c->worker);
    // Alice's sweep; worker w1 holds an attempt of its first run; w2 is registered too.
    xmod::v1::SubmitSweepRequest submit;
    *submit.mutable_spec() = TinySweep(dir_);
    xmod::v1::SubmitSweepResponse submitted;
    ASSERT_TRUE(stub_->SubmitSweep(BearerContext(kAlice).get(), submit, &submitted).ok());
    sweep_ = submitted.sweep_id();
    run_ = submitted.runs(submitted.runs_size() - 1).id();
    w1_ = Register(kW1, "w1");
    w2_ = Register(kW2, "w2");
    xmod::v1::AcquireRunRequest acquire;
    acquire.set_worker_id(w1_);
    acquire.add_free_slots(0);
    xmod::v1::AcquireRunResponse leased;
    ASSERT_TRUE(worker_->AcquireRun(BearerContext(kW1).get(), acquire, &leased).ok());
    ASSERT_TRUE(leased.has_assignment());
    leased_run_ = leased.assignment().run_id();
    attempt_ = leased.assignment().attempt();
  }

  int64_t Register(const std::string& token, const std::string& name) {
    xmod::v1::RegisterResponse registered;
    grpc::Status status =
        worker_->Register(BearerContext(token).get(), CpuWorker(name, 1), &registered);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return registered.worker_id();
  }

  // One call of the table made with `token`; `worker_id` is the worker a worker call claims to
  // be (w1_ for its own, w2_ for another's, whichever token makes it).
  using Call = std::function<grpc::Status(const std::string& token, int64_t worker_id)>;
  std::map<std::string, Call> Calls();
  grpc::Status Watch(const std::string& token);
  // A backup streamed to its end (its bytes dropped).
  grpc::Status Backup(const std::string& token);

  std::string dir_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<xmod::v1::Coordinator::Stub> stub_;
  std::unique_ptr<xmod::v1::WorkerGateway::Stub> worker_;
  int64_t sweep_ = 0;
  int64_t run_ = 0;  // a queued run of alice's sweep
  int64_t w1_ = 0;
  int64_t w2_ = 0;
  int64_t leased_run_ = 0;  // w1's attempt
  int attempt_ = 0;
};

grpc::Status ScopeTableTest::Backup(const std::string& token) {
  std::unique_ptr<grpc::ClientContext> context = BearerContext(token);
  auto stream = stub_->Backup(context.get(), xmod::v1::BackupRequest());
  xmod::v1::BackupChunk chunk;
  while (stream->Read(&chunk)) {
  }
  return stream->Finish();
}

grpc::Status ScopeTableTest::Watch(const std::string& token) {
  std::unique_ptr<grpc::ClientContext> context = BearerContext(token);
  xmod::v1::WatchSweepRequest request;
  request.set_sweep_id(sweep_);
  auto stream = stub_->WatchSweep(context.get(), request);
  xmod::v1::WatchSweepEvent event;
  if (!stream->Read(&event)) return stream->Finish();  // refused before the snapshot
  context->TryCancel();
  while (stream->Read(&event)) {
  }
  stream->Finish();
  return grpc::Status::OK;
}

// A unary call of `stub` with a default response, as a Call's body.
template <typename Stub, typename Request, typename Response>
grpc::Status Unary(Stub* stub,
                   grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                   const std::string& token, const Request& request) {
  Response response;
  return (stub->*method)(BearerContext(token).get(), request, &response);
}

std::map<std::string, ScopeTableTest::Call> ScopeTableTest::Calls() {
  using C = xmod::v1::Coordinator::Stub;
  using W = xmod::v1::WorkerGateway::Stub;
  C* c = stub_.get();
  W* w = worker_.get();
  std::map<std::string, Call> calls;
  const auto user = [&](const std::string& name, auto method, auto request) {
    calls[name] = [c, method, request](const std::string& token, int64_t) {
      return Unary(c, method, token, request);
    };
  };
  // A request about alice's sweep, or about her queued run.
  const auto of_sweep = [this](auto request) {
    request.set_sweep_id(sweep_);
    return request;
  };
  const auto of_run = [this](auto request) {
    request.set_run_id(run_);
    return request;
  };
  user("GetSweep", &C::GetSweep, of_sweep(xmod::v1::GetSweepRequest()));
  user("ListSweeps", &C::ListSweeps, xmod::v1::ListSweepsRequest());
  user("ListRuns", &C::ListRuns, of_sweep(xmod::v1::ListRunsRequest()));
  user("GetRun", &C::GetRun, of_run(xmod::v1::GetRunRequest()));
  calls["WatchSweep"] = [this](const std::string& token, int64_t) { return Watch(token); };
  calls["Backup"] = [this](const std::string& token, int64_t) { return Backup(token); };
  user("GetMetrics", &C::GetMetrics, of_run(xmod::v1::GetMetricsRequest()));
  xmod::v1::QueryRequest query;
  query.set_sql("SELECT COUNT(*) FROM runs");
  user("Query", &C::Query, query);
  user("GetFit", &C::GetFit, of_sweep(xmod::v1::GetFitRequest()));
  user("Predict", &C::Predict, of_sweep(xmod::v1::PredictRequest()));
  user("Recommend", &C::Recommend, of_sweep(xmod::v1::RecommendRequest()));
  xmod::v1::PlanRequest plan;
  plan.mutable_model()->mutable_backbone()->set_name("tiny-test");
  plan.set_seq_len(64);
  user("Plan", &C::Plan, plan);
  xmod::v1::GetStudyRequest study;
  study.set_name("none");
  user("GetStudy", &C::GetStudy, study);
  user("ListStudies", &C::ListStudies, xmod::v1::ListStudiesRequest());
  user("ListDecisions", &C::ListDecisions, of_sweep(xmod::v1::ListDecisionsRequest()));
  user("SelectPilot", &C::SelectPilot, of_sweep(xmod::v1::SelectPilotRequest()));
  user("GetUsage", &C::GetUsage, xmod::v1::GetUsageRequest());
  user("ListEvents", &C::ListEvents, xmod::v1::ListEventsRequest());
  xmod::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = TinySweep(dir_);
  submit.set_dry_run(true);
  user("SubmitSweep with dry_run", &C::SubmitSweep, submit);
  submit.set_dry_run(false);
  user("SubmitSweep", &C::SubmitSweep, submit);
  user("CancelSweep", &C::CancelSweep, of_sweep(xmod::v1::CancelSweepRequest()));
  user("RetryFailed", &C::RetryFailed, of_sweep(xmod::v1::RetryFailedRequest()));
  user("CancelRun", &C::CancelRun, of_run(xmod::v1::CancelRunRequest()));
  user("ResumeRun", &C::ResumeRun, of_run(xmod::v1::ResumeRunRequest()));
  xmod::v1::CreateStudyRequest create;
  create.mutable_spec()->set_name("scopes");
  xmod::v1::StudyMember* member = create.mutable_spec()->add_members();
  member->set_sweep_id(sweep_);
  member->set_role("kxl");
  create.set_dry_run(true);
  user("CreateStudy with dry_run", &C::CreateStudy, create);
  create.set_dry_run(false);
  calls["CreateStudy"] = [c, create](const std::string& token, int64_t) mutable {
    create.mutable_spec()->set_name(absl::StrCat("scopes-", token.substr(0, 3)));
    return Unary(c, &C::CreateStudy, token, create);
  };
  xmod::v1::ProposeRunsRequest propose = of_sweep(xmod::v1::ProposeRunsRequest());
  user("ProposeRuns", &C::ProposeRuns, propose);
  propose.set_submit(true);
  user("ProposeRuns with submit", &C::ProposeRuns, propose);

  calls["WorkerGateway.Register"] = [w, this](const std::string& token, int64_t worker_id) {
    return Unary(w, &W::Register, token, CpuWorker(worker_id == w1_ ? "w1" : "w2", 1));
  };
  calls["WorkerGateway.Heartbeat"] = [w](const std::string& token, int64_t worker_id) {
    xmod::v1::HeartbeatRequest heartbeat;
    heartbeat.set_worker_id(worker_id);
    return Unary(w, &W::Heartbeat, token, heartbeat);
  };
  calls["WorkerGateway.AcquireRun"] = [w](const std::string& token, int64_t worker_id) {
    xmod::v1::AcquireRunRequest acquire;
    acquire.set_worker_id(worker_id);
    return Unary(w, &W::AcquireRun, token, acquire);
  };
  // The attempt-bound calls: `worker_id`'s report for w1's attempt.
  const auto report = [this](auto request, int64_t worker_id) {
    request.set_worker_id(worker_id);
    request.set_run_id(leased_run_);
    request.set_attempt(attempt_);
    return request;
  };
  calls["WorkerGateway.ReportMetrics"] = [w, report](const std::string& token, int64_t worker) {
    return Unary(w, &W::ReportMetrics, token, report(xmod::v1::ReportMetricsRequest(), worker));
  };
  calls["WorkerGateway.ReportCheckpoint"] = [w, report](const std::string& token, int64_t worker) {
    xmod::v1::ReportCheckpointRequest rejected;
    rejected.set_rejected("a test's refusal");
    return Unary(w, &W::ReportCheckpoint, token, report(rejected, worker));
  };
  calls["WorkerGateway.FinishRun"] = [w, report](const std::string& token, int64_t worker) {
    xmod::v1::FinishRunRequest preempted;
    preempted.set_outcome(xmod::v1::OUTCOME_PREEMPTED);
    return Unary(w, &W::FinishRun, token, report(preempted, worker));
  };
  return calls;
}

bool Allowed(const grpc::Status& status) {
  return status.error_code() != grpc::StatusCode::PERMISSION_DENIED &&
         status.error_code() != grpc::StatusCode::UNAUTHENTICATED;
}

TEST_F(ScopeTableTest, EveryCellOfTheDocumentedTableHolds) {
  const std::map<std::string, std::vector<std::string>> table = ReadScopeTable();
  std::map<std::string, Call> calls = Calls();
  // Every method of both services is in the table.
  for (const std::string& full_name :
       {xmod::v1::Coordinator::service_full_name(), xmod::v1::WorkerGateway::service_full_name()}) {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(full_name);
    ASSERT_NE(service, nullptr) << full_name;
    for (int m = 0; m < service->method_count(); ++m) {
      const std::string name = service->name() == "WorkerGateway"
                                   ? absl::StrCat("WorkerGateway.", service->method(m)->name())
                                   : service->method(m)->name();
      EXPECT_EQ(table.count(name), 1u) << name << " is missing from docs/security.md's table";
    }
  }
  // The changes run last, FinishRun after every other worker call, so each call finds the
  // state it is about (a refusal is decided before any state is looked at all the same).
  std::vector<std::string> order;
  for (const auto& [name, cells] : table) {
    if (name != "WorkerGateway.FinishRun") order.push_back(name);
  }
  order.push_back("WorkerGateway.FinishRun");
  const std::map<std::string, std::string> token_of = {
      {"read", kViewer}, {"user", kBob}, {"admin", kOps}, {"worker", kW1}};
  for (const std::string& name : order) {
    ASSERT_EQ(calls.count(name), 1u) << "the table lists " << name << ", which this test lacks";
    const Call& call = calls.at(name);
    const std::vector<std::string>& cells = table.at(name);
    for (size_t s = 0; s < 4; ++s) {
      const std::string scope = kScopes[s];
      const std::string& cell = cells[s];
      const std::string at = absl::StrCat(name, " as ", scope, " (", cell, "): ");
      const bool worker_call = absl::StartsWith(name, "WorkerGateway.");
      if (cell == "yes" || cell == "no") {
        const grpc::Status status = call(token_of.at(scope), w1_);
        if (cell == "yes") EXPECT_TRUE(Allowed(status)) << at << status.error_message();
        if (cell == "no") {
          EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
              << at << status.error_message();
        }
      } else if (cell == "own") {
        // Another's work first: a refused call changes nothing the allowed one needs.
        const grpc::Status others = worker_call ? call(kW2, w1_) : call(kBob, 0);
        EXPECT_EQ(others.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << at << "on another's: " << others.error_message();
        const grpc::Status own = worker_call ? call(kW1, w1_) : call(kAlice, 0);
        EXPECT_TRUE(Allowed(own)) << at << "on its own: " << own.error_message();
      } else if (cell == "any") {
        const grpc::Status status = call(kOps, 0);
        EXPECT_TRUE(Allowed(status)) << at << status.error_message();
      } else {
        ADD_FAILURE() << at << "unknown cell \"" << cell << "\"";
      }
    }
  }
}

}  // namespace
}  // namespace xmod
