// A lab's users are tenants (docs/security.md, "What each scope may do"), through real gRPC
// and HTTP clients of an in-process coordinator with credentials for users alice, bob and
// carol (alice and carol in group "lab"), admin ops and reader viewer:
//   - every change bob makes to alice's work — CancelRun, CancelSweep, RetryFailed,
//     ResumeRun, CreateStudy over her sweep, ProposeRuns with submit, and the dashboard's POST
//     routes — is PERMISSION_DENIED naming alice, and changes no row of any table (the event
//     log included);
//   - the same calls work for alice, for carol (her group) and for the admin, and each is on
//     record with its actor (ListEvents, GetUsage);
//   - work submitted before the coordinator had credentials belongs to no user: only an admin
//     may change it;
//   - the dashboard's changes need the X-Xmod-Action header with a session, and a user scope.
#include <httplib.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "coordinator/coordinator.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer_contract/exit_codes.h"
#include "xmod/v1/coordinator.grpc.pb.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kBob[] = "bob-token-0123456789ab";
constexpr char kCarol[] = "carol-token-0123456789";
constexpr char kOps[] = "ops-token-0123456789abc";
constexpr char kViewer[] = "viewer-token-0123456789";
constexpr char kWorker[] = "worker-token-0123456789";

constexpr char kCredentials[] =
    "user alice alice-token-0123456789\n"
    "user bob bob-token-0123456789ab\n"
    "user carol carol-token-0123456789\n"
    "admin ops ops-token-0123456789abc\n"
    "read viewer viewer-token-0123456789\n"
    "worker w1 worker-token-0123456789\n";

class TenantsTest : public testing::Test {
 protected:
  void SetUp() override { dir_ = NewTestDir("tenants"); }

  // Starts (or restarts, on the same database) the coordinator; without `credentials`
  // everyone is the anonymous caller.
  void Start(const std::string& credentials = kCredentials) {
    if (coordinator_ != nullptr) coordinator_->Shutdown();
    coordinator_.reset();
    CoordinatorOptions options = LoopbackOptions(dir_);
    options.tick_ms = 3'600'000;  // nothing changes behind the test's back
    options.sharing.groups_of["alice"] = {"lab"};
    options.sharing.groups_of["carol"] = {"lab"};
    absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(options, credentials);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(c->coordinator);
    stub_ = std::move(c->user);
    worker_ = std::move(c->worker);
  }

  int64_t Submit(const std::string& token) {
    xmod::v1::SubmitSweepRequest request;
    *request.mutable_spec() = TinySweep(dir_);
    xmod::v1::SubmitSweepResponse response;
    grpc::Status status = stub_->SubmitSweep(BearerContext(token).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.sweep_id();
  }

  std::vector<int64_t> RunIds(int64_t sweep_id) {
    xmod::v1::ListRunsRequest request;
    request.set_sweep_id(sweep_id);
    xmod::v1::ListRunsResponse response;
    EXPECT_TRUE(stub_->ListRuns(BearerContext(kViewer).get(), request, &response).ok());
    std::vector<int64_t> ids;
    for (const xmod::v1::Run& run : response.runs()) ids.push_back(run.id());
    return ids;
  }

  // The worker leases the next run and ends its attempt with an invalid configuration: the
  // run is FAILED at once. Its id.
  int64_t FailOneRun() {
    xmod::v1::RegisterResponse registered;
    EXPECT_TRUE(
        worker_->Register(BearerContext(kWorker).get(), CpuWorker("w1", 1), &registered).ok());
    xmod::v1::AcquireRunRequest acquire;
    acquire.set_worker_id(registered.worker_id());
    acquire.add_free_slots(0);
    xmod::v1::AcquireRunResponse leased;
    EXPECT_TRUE(worker_->AcquireRun(BearerContext(kWorker).get(), acquire, &leased).ok());
    EXPECT_TRUE(leased.has_assignment());
    xmod::v1::FinishRunRequest finish;
    finish.set_worker_id(registered.worker_id());
    finish.set_run_id(leased.assignment().run_id());
    finish.set_attempt(leased.assignment().attempt());
    finish.set_outcome(xmod::v1::OUTCOME_FAILED);
    finish.set_exit_code(kExitInvalidConfig);
    xmod::v1::FinishRunResponse finished;
    EXPECT_TRUE(worker_->FinishRun(BearerContext(kWorker).get(), finish, &finished).ok());
    EXPECT_EQ(StoredRun(*coordinator_->store(), finish.run_id()).state(), xmod::v1::FAILED);
    return finish.run_id();
  }

  // The changes of the table, by name, each made with `token` on sweep `sweep` / run `run`.
  std::map<std::string, grpc::Status> Changes(const std::string& token, int64_t sweep, int64_t run,
                                              int64_t failed_run) {
    std::map<std::string, grpc::Status> out;
    xmod::v1::CancelRunRequest cancel_run;
    cancel_run.set_run_id(run);
    xmod::v1::Run run_answer;
    out["CancelRun"] = stub_->CancelRun(BearerContext(token).get(), cancel_run, &run_answer);
    xmod::v1::ResumeRunRequest resume;
    resume.set_run_id(failed_run);
    out["ResumeRun"] = stub_->ResumeRun(BearerContext(token).get(), resume, &run_answer);
    xmod::v1::RetryFailedRequest retry;
    retry.set_sweep_id(sweep);
    xmod::v1::RetryFailedResponse retried;
    out["RetryFailed"] = stub_->RetryFailed(BearerContext(token).get(), retry, &retried);
    xmod::v1::CreateStudyRequest study;
    study.mutable_spec()->set_name(absl::StrCat("study-", sweep, "-", token.substr(0, 3)));
    xmod::v1::StudyMember* member = study.mutable_spec()->add_members();
    member->set_sweep_id(sweep);
    member->set_role("kxl");
    xmod::v1::Study created;
    out["CreateStudy"] = stub_->CreateStudy(BearerContext(token).get(), study, &created);
    xmod::v1::ProposeRunsRequest propose;
    propose.set_sweep_id(sweep);
    propose.set_submit(true);
    xmod::v1::DesignDecision decision;
    out["ProposeRuns"] = stub_->ProposeRuns(BearerContext(token).get(), propose, &decision);
    xmod::v1::CancelSweepRequest cancel_sweep;
    cancel_sweep.set_sweep_id(sweep);
    xmod::v1::Sweep sweep_answer;
    out["CancelSweep"] =
        stub_->CancelSweep(BearerContext(token).get(), cancel_sweep, &sweep_answer);
    return out;
  }

  // The dashboard's POST `path` with `token` as bearer token.
  httplib::Result Post(const std::string& path, const std::string& token) {
    httplib::Client http("127.0.0.1", coordinator_->ports().http);
    return http.Post(path, httplib::Headers{{"Authorization", absl::StrCat("Bearer ", token)}}, "",
                     "text/plain");
  }

  xmod::v1::ListEventsResponse Events(const xmod::v1::ListEventsRequest& request) {
    xmod::v1::ListEventsResponse response;
    grpc::Status status = stub_->ListEvents(BearerContext(kViewer).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  std::string dir_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<xmod::v1::Coordinator::Stub> stub_;
  std::unique_ptr<xmod::v1::WorkerGateway::Stub> worker_;
};

TEST_F(TenantsTest, BobsChangesToAlicesWorkAreRefusedNamingHerAndChangeNoRow) {
  Start();
  const int64_t sweep = Submit(kAlice);
  const int64_t failed = FailOneRun();
  const int64_t queued = RunIds(sweep).back();
  ASSERT_NE(queued, failed);
  const std::map<std::string, std::string> before =
      TableRows(*coordinator_->store(), /*with_events=*/true);

  const std::map<std::string, grpc::Status> refused = Changes(kBob, sweep, queued, failed);
  ASSERT_EQ(refused.size(), 6u);
  for (const auto& [call, status] : refused) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << call << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("belongs to user \"alice\"")) << call;
    EXPECT_THAT(status.error_message(), HasSubstr("user credential \"bob\"")) << call;
  }
  EXPECT_EQ(refused.at("CancelRun").error_message(),
            absl::StrCat("CancelRun: run ", queued, " (sweep ", sweep,
                         ") belongs to user \"alice\"; user credential \"bob\" may change only "
                         "its own work and its groups' (an admin credential may change "
                         "anyone's)"));
  // The dashboard's routes answer the same.
  for (const std::string& path : {absl::StrCat("/api/runs/", queued, "/cancel"),
                                  absl::StrCat("/api/runs/", failed, "/resume"),
                                  absl::StrCat("/api/sweeps/", sweep, "/cancel"),
                                  absl::StrCat("/api/sweeps/", sweep, "/retry")}) {
    httplib::Result result = Post(path, kBob);
    ASSERT_TRUE(result) << path;
    EXPECT_EQ(result->status, 403) << path;
    EXPECT_THAT(result->body, HasSubstr("belongs to user \\\"alice\\\"")) << path;
  }
  EXPECT_EQ(TableRows(*coordinator_->store(), /*with_events=*/true), before)
      << "a refused change changed the database";
  EXPECT_EQ(StoredRun(*coordinator_->store(), queued).state(), xmod::v1::QUEUED);
  EXPECT_EQ(StoredRun(*coordinator_->store(), failed).state(), xmod::v1::FAILED);
}

TEST_F(TenantsTest, TheOwnerHerGroupAndAnAdminMayMakeEachChange) {
  Start();
  for (const char* token : {kAlice, kCarol, kOps}) {
    const int64_t sweep = Submit(kAlice);
    const int64_t failed = FailOneRun();
    const int64_t queued = RunIds(sweep).back();
    for (const auto& [call, status] : Changes(token, sweep, queued, failed)) {
      // ProposeRuns may find too little to fit yet; it is past the owner check all the same.
      EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
          << token << " " << call << ": " << status.error_message();
      if (call != "ProposeRuns") EXPECT_TRUE(status.ok()) << call << ": " << status.error_message();
    }
    EXPECT_EQ(StoredRun(*coordinator_->store(), queued).state(), xmod::v1::CANCELLED);
  }
  // Each change is on record with the credential that made it.
  xmod::v1::ListEventsRequest by_ops;
  by_ops.set_actor("ops");
  std::set<std::string> kinds;
  const xmod::v1::ListEventsResponse ops_events = Events(by_ops);
  for (const xmod::v1::Event& e : ops_events.events()) {
    EXPECT_EQ(e.actor(), "ops");
    kinds.insert(e.kind());
  }
  for (const char* kind :
       {"run_cancelled", "run_resumed", "sweep_retried", "study_created", "sweep_cancelled"}) {
    EXPECT_EQ(kinds.count(kind), 1u) << kind;
  }
  xmod::v1::GetUsageResponse usage;
  ASSERT_TRUE(stub_->GetUsage(BearerContext(kViewer).get(), {}, &usage).ok());
  std::map<std::string, xmod::v1::UserUsage> users;
  for (const xmod::v1::UserUsage& u : usage.users()) users[u.user()] = u;
  ASSERT_EQ(users.count("ops"), 1u);
  EXPECT_GE(users["ops"].changes(), 5);
  EXPECT_EQ(users["ops"].changes_to_others_work(), users["ops"].changes());
  EXPECT_EQ(users["carol"].changes_to_others_work(), users["carol"].changes());
  EXPECT_EQ(users["alice"].changes_to_others_work(), 0);  // all her own
  ASSERT_GT(usage.recent_changes_size(), 0);
  EXPECT_TRUE(usage.recent_changes(0).has_actor());
}

TEST_F(TenantsTest, EventsRecordTheActorAndTheCoordinatorsOwnChangesHaveNone) {
  Start();
  const int64_t sweep = Submit(kAlice);
  const int64_t run = RunIds(sweep).front();
  xmod::v1::CancelRunRequest cancel;
  cancel.set_run_id(run);
  xmod::v1::Run answer;
  ASSERT_TRUE(stub_->CancelRun(BearerContext(kOps).get(), cancel, &answer).ok());
  xmod::v1::RegisterResponse registered;
  ASSERT_TRUE(
      worker_->Register(BearerContext(kWorker).get(), CpuWorker("w1", 1), &registered).ok());

  xmod::v1::ListEventsRequest of_run;
  of_run.set_run_id(run);
  const xmod::v1::ListEventsResponse run_events = Events(of_run);
  ASSERT_EQ(run_events.events_size(), 1);
  EXPECT_EQ(run_events.events(0).kind(), "run_cancelled");
  EXPECT_EQ(run_events.events(0).actor(), "ops");
  xmod::v1::ListEventsRequest of_sweep;
  of_sweep.set_sweep_id(sweep);
  const xmod::v1::ListEventsResponse sweep_events = Events(of_sweep);
  ASSERT_EQ(sweep_events.events_size(), 2);  // newest first
  EXPECT_EQ(sweep_events.events(1).kind(), "sweep_submitted");
  EXPECT_EQ(sweep_events.events(1).actor(), "alice");
  // The worker's registration is the coordinator's own event: no actor.
  const xmod::v1::ListEventsResponse all = Events({});
  ASSERT_EQ(all.events(0).kind(), "worker_registered");
  EXPECT_FALSE(all.events(0).has_actor());

  // Pages: one event a page, each page older than the last, then none.
  xmod::v1::ListEventsRequest page;
  page.set_limit(1);
  std::vector<int64_t> ids;
  do {
    const xmod::v1::ListEventsResponse got = Events(page);
    ASSERT_EQ(got.events_size(), 1);
    ids.push_back(got.events(0).id());
    page.set_before_id(got.next_before_id());
  } while (page.before_id() != 0);
  EXPECT_EQ(ids.size(), static_cast<size_t>(all.events_size()));
  EXPECT_TRUE(std::is_sorted(ids.rbegin(), ids.rend()));
  page.set_limit(1001);
  xmod::v1::ListEventsResponse refused;
  grpc::Status status = stub_->ListEvents(BearerContext(kViewer).get(), page, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "limit: 1001 exceeds the limit 1000");
}

TEST_F(TenantsTest, WorkSubmittedWithoutCredentialsIsAnAdminsToChange) {
  Start(/*credentials=*/"");
  const int64_t sweep = Submit("");
  Start();  // the same database, now with credentials
  const int64_t run = RunIds(sweep).front();
  xmod::v1::CancelRunRequest cancel;
  cancel.set_run_id(run);
  xmod::v1::Run answer;
  grpc::Status status = stub_->CancelRun(BearerContext(kAlice).get(), cancel, &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("was submitted without credentials and belongs to no user"));
  status = stub_->CancelRun(BearerContext(kOps).get(), cancel, &answer);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(answer.state(), xmod::v1::CANCELLED);
}

TEST_F(TenantsTest, TheDashboardsChangesNeedTheActionHeaderAndAUserScope) {
  Start();
  const int64_t sweep = Submit(kAlice);
  const std::vector<int64_t> runs = RunIds(sweep);
  ASSERT_GE(runs.size(), 2u);
  httplib::Client http("127.0.0.1", coordinator_->ports().http);
  const auto session_of = [&](const std::string& token) {
    httplib::Result login = http.Post("/api/login", token, "text/plain");
    EXPECT_TRUE(login && login->status == 200);
    const std::string cookie = login->get_header_value("Set-Cookie");
    return cookie.substr(0, cookie.find(';'));
  };
  const std::string alice = session_of(kAlice);
  const std::string viewer = session_of(kViewer);
  const std::string cancel = absl::StrCat("/api/runs/", runs[0], "/cancel");

  // A session's change without the header: what a form on another site would send.
  httplib::Result result = http.Post(cancel, httplib::Headers{{"Cookie", alice}}, "", "text/plain");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 403);
  EXPECT_THAT(result->body, HasSubstr("X-Xmod-Action"));
  EXPECT_EQ(StoredRun(*coordinator_->store(), runs[0]).state(), xmod::v1::QUEUED);
  // A read credential's session may not change anything.
  result = http.Post(cancel, httplib::Headers{{"Cookie", viewer}, {"X-Xmod-Action", "1"}}, "",
                     "text/plain");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 403);
  EXPECT_THAT(result->body, HasSubstr("read-only"));
  // Alice's session with the header: done, and on record as hers.
  result = http.Post(cancel, httplib::Headers{{"Cookie", alice}, {"X-Xmod-Action", "1"}}, "",
                     "text/plain");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200) << result->body;
  EXPECT_THAT(result->body, HasSubstr("\"state\":\"CANCELLED\""));
  result = http.Get(absl::StrCat("/api/runs/", runs[0], "/history"),
                    httplib::Headers{{"Cookie", viewer}});
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_THAT(result->body, HasSubstr("\"actor\":\"alice\""));
  // A bearer token needs no header (a script's token is no ambient credential).
  result = Post(absl::StrCat("/api/runs/", runs[1], "/cancel"), kOps);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200) << result->body;
}

}  // namespace
}  // namespace xmod
