// A shared cluster through the real Coordinator API on loopback (docs/operations.md,
// "Sharing a cluster"): sweeps record the credential that submitted them, GetRun shows a
// run's user, preemptibility and preemptions, GetUsage answers per
// user from the database (slots, quota, weight, share, core-hours), and its window is
// checked with the field named.
#include <string>

#include "absl/strings/str_cat.h"
#include "coordinator/coordinator.h"
#include "coordinator/tests/test_util.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kBob[] = "bob-token-0123456789ab";
constexpr char kWorker[] = "worker-token-0123456789";

class SharingServiceTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("sharing_service");
    CoordinatorOptions options = LoopbackOptions(dir_);
    options.tick_ms = 3'600'000;  // nothing is preempted behind the test's back
    options.sharing.users["alice"].cpu_slots = 1;
    options.sharing.users["alice"].weight = 3;
    absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(
        options, absl::StrCat("user alice ", kAlice, "\nuser bob ", kBob, "\nworker w1 ", kWorker));
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(c->coordinator);
    stub_ = std::move(c->user);
    worker_ = std::move(c->worker);
  }

  xmod::v1::SubmitSweepResponse Submit(const std::string& token, xmod::v1::SweepSpec spec) {
    xmod::v1::SubmitSweepRequest request;
    *request.mutable_spec() = std::move(spec);
    xmod::v1::SubmitSweepResponse response;
    grpc::Status status = stub_->SubmitSweep(BearerContext(token).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  std::string dir_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<xmod::v1::Coordinator::Stub> stub_;
  std::unique_ptr<xmod::v1::WorkerGateway::Stub> worker_;
};

TEST_F(SharingServiceTest, RunsCarryTheCredentialThatSubmittedThem) {
  const xmod::v1::SubmitSweepResponse alice = Submit(kAlice, TinySweep(dir_));
  const xmod::v1::SubmitSweepResponse bob = Submit(kBob, TinySweep(dir_));
  ASSERT_GT(alice.runs_size(), 0);
  ASSERT_GT(bob.runs_size(), 0);
  xmod::v1::GetRunRequest get_run;
  get_run.set_run_id(alice.runs(0).id());
  xmod::v1::GetRunResponse run;
  ASSERT_TRUE(stub_->GetRun(BearerContext(kBob).get(), get_run, &run).ok());
  EXPECT_EQ(run.sharing().submitter(), "alice");
  EXPECT_TRUE(run.sharing().preemptible());
  EXPECT_EQ(run.sharing().preemptions_size(), 0);
  get_run.set_run_id(bob.runs(0).id());
  ASSERT_TRUE(stub_->GetRun(BearerContext(kBob).get(), get_run, &run).ok());
  EXPECT_EQ(run.sharing().submitter(), "bob");
  EXPECT_TRUE(run.sharing().preemptible());
}

TEST_F(SharingServiceTest, PreemptibleFalseReachesTheRunsAGridSettingWinning) {
  xmod::v1::SweepSpec spec = TinySweep(dir_);
  spec.set_preemptible(false);
  const xmod::v1::SubmitSweepResponse pinned = Submit(kAlice, spec);
  ASSERT_GT(pinned.runs_size(), 0);
  for (const xmod::v1::Run& run : pinned.runs()) EXPECT_FALSE(run.preemptible()) << run.name();
  spec.mutable_grids(0)->set_preemptible(true);
  const xmod::v1::SubmitSweepResponse overridden = Submit(kAlice, spec);
  for (const xmod::v1::Run& run : overridden.runs()) EXPECT_TRUE(run.preemptible()) << run.name();

  xmod::v1::GetRunRequest get_run;
  get_run.set_run_id(pinned.runs(0).id());
  xmod::v1::GetRunResponse run;
  ASSERT_TRUE(stub_->GetRun(BearerContext(kBob).get(), get_run, &run).ok());
  EXPECT_FALSE(run.run().preemptible());
  EXPECT_FALSE(run.sharing().preemptible());
  get_run.set_run_id(overridden.runs(0).id());
  ASSERT_TRUE(stub_->GetRun(BearerContext(kBob).get(), get_run, &run).ok());
  EXPECT_TRUE(run.run().preemptible());

  xmod::v1::GetSweepRequest get_sweep;
  get_sweep.set_sweep_id(pinned.sweep_id());
  xmod::v1::Sweep sweep;
  ASSERT_TRUE(stub_->GetSweep(BearerContext(kBob).get(), get_sweep, &sweep).ok());
  EXPECT_EQ(sweep.submitter(), "alice");
}

TEST_F(SharingServiceTest, UsageCountsSlotsAndCoreHoursFromTheDatabase) {
  const xmod::v1::SubmitSweepResponse alice = Submit(kAlice, TinySweep(dir_));
  Submit(kBob, TinySweep(dir_));
  xmod::v1::RegisterRequest registration = CpuWorker("w1", 2);
  xmod::v1::RegisterResponse registered;
  ASSERT_TRUE(worker_->Register(BearerContext(kWorker).get(), registration, &registered).ok());
  xmod::v1::AcquireRunRequest acquire;
  acquire.set_worker_id(registered.worker_id());
  acquire.add_free_slots(0);
  acquire.add_free_slots(1);
  xmod::v1::AcquireRunResponse leased;
  ASSERT_TRUE(worker_->AcquireRun(BearerContext(kWorker).get(), acquire, &leased).ok());
  ASSERT_TRUE(leased.has_assignment());

  xmod::v1::GetUsageRequest request;  // window 0: the default 24 h
  xmod::v1::GetUsageResponse usage;
  ASSERT_TRUE(stub_->GetUsage(BearerContext(kBob).get(), request, &usage).ok());
  EXPECT_EQ(usage.window_ms(), 24 * 3600 * 1000);
  ASSERT_EQ(usage.users_size(), 2);
  const xmod::v1::UserUsage& a = usage.users(0);
  const xmod::v1::UserUsage& b = usage.users(1);
  EXPECT_EQ(a.user(), "alice");
  EXPECT_EQ(b.user(), "bob");
  // Both at 0 slots, alice's run comes first (FIFO); the lease is hers.
  EXPECT_EQ(leased.assignment().run_id(), alice.runs(0).id());
  EXPECT_EQ(a.cpu_slots_in_use(), 1);
  EXPECT_EQ(a.cpu_quota(), 1);
  EXPECT_EQ(a.gpu_quota(), -1);
  EXPECT_EQ(a.borrowed_slots(), 0);
  EXPECT_EQ(a.running_runs(), 1);
  EXPECT_EQ(a.queued_runs(), alice.runs_size() - 1);
  EXPECT_DOUBLE_EQ(a.share(), 0.75);  // weight 3 against bob's 1
  EXPECT_DOUBLE_EQ(b.share(), 0.25);
  EXPECT_EQ(b.cpu_quota(), -1);
  EXPECT_GE(a.core_hours(), 0);
  EXPECT_EQ(b.core_hours(), 0);

  // Alice is at her quota: the worker's other slot goes to bob's run.
  acquire.clear_free_slots();
  acquire.add_free_slots(1);
  ASSERT_TRUE(worker_->AcquireRun(BearerContext(kWorker).get(), acquire, &leased).ok());
  ASSERT_TRUE(leased.has_assignment());
  xmod::v1::GetRunRequest get_run;
  get_run.set_run_id(leased.assignment().run_id());
  xmod::v1::GetRunResponse run;
  ASSERT_TRUE(stub_->GetRun(BearerContext(kBob).get(), get_run, &run).ok());
  EXPECT_EQ(run.sharing().submitter(), "bob");
}

TEST_F(SharingServiceTest, AWindowPastTheCapIsRefusedNamingIt) {
  xmod::v1::GetUsageRequest request;
  xmod::v1::GetUsageResponse usage;
  request.set_window_ms(-1);
  grpc::Status status = stub_->GetUsage(BearerContext(kAlice).get(), request, &usage);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message().rfind("window_ms: ", 0), 0u) << status.error_message();
  request.set_window_ms(int64_t{400} * 24 * 3600 * 1000);
  status = stub_->GetUsage(BearerContext(kAlice).get(), request, &usage);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message().rfind("window_ms: ", 0), 0u) << status.error_message();
  // Nobody unauthenticated.
  grpc::ClientContext anonymous;
  status = stub_->GetUsage(&anonymous, request, &usage);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace xmod
