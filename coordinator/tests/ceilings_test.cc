// What the operator grants (docs/operations.md, "Sharing a cluster"), through the real
// Coordinator API of an in-process coordinator and its real scheduler:
//   - a submission above the user's priority ceiling, or with `preemptible: false` where the
//     user may not have non-preemptible runs, is INVALID_ARGUMENT naming the field and the
//     ceiling (dry runs too), and stores nothing;
//   - slots borrowed beyond a quota are taken back for a user within quota even from runs
//     marked `preemptible: false`, and the PREEMPT order is on record with that user as its
//     actor.
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "coordinator/coordinator.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kBob[] = "bob-token-0123456789ab";
constexpr char kOps[] = "ops-token-0123456789abc";
constexpr char kWorker[] = "worker-token-0123456789";

class CeilingsTest : public testing::Test {
 protected:
  void Start(const scheduling::SharingPolicy& sharing) {
    dir_ = NewTestDir("ceilings");
    CoordinatorOptions options = LoopbackOptions(dir_);
    options.tick_ms = 3'600'000;  // the test runs the preemption pass itself
    options.sharing = sharing;
    absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(
        options, absl::StrCat("user alice ", kAlice, "\nuser bob ", kBob, "\nadmin ops ", kOps,
                              "\nworker w1 ", kWorker));
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(c->coordinator);
    stub_ = std::move(c->user);
    worker_ = std::move(c->worker);
  }

  grpc::Status Submit(const std::string& token, const xmod::v1::SweepSpec& spec,
                      bool dry_run = false, xmod::v1::SubmitSweepResponse* out = nullptr) {
    xmod::v1::SubmitSweepRequest request;
    *request.mutable_spec() = spec;
    request.set_dry_run(dry_run);
    xmod::v1::SubmitSweepResponse response;
    grpc::Status status = stub_->SubmitSweep(BearerContext(token).get(), request, &response);
    if (out != nullptr) *out = response;
    return status;
  }

  std::string dir_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<xmod::v1::Coordinator::Stub> stub_;
  std::unique_ptr<xmod::v1::WorkerGateway::Stub> worker_;
};

TEST_F(CeilingsTest, SubmissionsPastWhatTheOperatorGrantsAreRefusedNamingTheField) {
  scheduling::SharingPolicy sharing;
  sharing.default_max_priority = 5;
  sharing.users["bob"].max_priority = 3;
  sharing.users["bob"].allow_non_preemptible = false;
  Start(sharing);
  const std::map<std::string, std::string> before = TableRows(*coordinator_->store(), true);
  const auto refused = [&](const std::string& token, const xmod::v1::SweepSpec& spec,
                           const std::string& message) {
    for (bool dry_run : {true, false}) {
      grpc::Status status = Submit(token, spec, dry_run);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << message;
      EXPECT_EQ(status.error_message(), message);
    }
  };
  xmod::v1::SweepSpec spec = TinySweep(dir_);
  spec.set_priority(4);
  refused(kBob, spec,
          "priority: 4 is above 3, the highest priority the sharing config grants user \"bob\" "
          "(max_priority)");
  spec.set_priority(6);
  refused(kAlice, spec,
          "priority: 6 is above 5, the highest priority the sharing config grants user "
          "\"alice\" (max_priority)");
  spec.set_priority(0);
  spec.set_preemptible(false);
  refused(kBob, spec,
          "preemptible: false is not granted to user \"bob\": the sharing config does not allow "
          "it non-preemptible runs (allow_non_preemptible)");
  spec.clear_preemptible();
  spec.mutable_grids(0)->set_preemptible(false);
  refused(kBob, spec,
          "grids[0].preemptible: false is not granted to user \"bob\": the sharing config does "
          "not allow it non-preemptible runs (allow_non_preemptible)");
  EXPECT_EQ(TableRows(*coordinator_->store(), true), before) << "a refused sweep was stored";

  // Within the ceilings: bob at 3, alice at 5 and non-preemptible (the default allows it);
  // a sweep's `preemptible: false` that every grid overrides makes no non-preemptible run.
  spec = TinySweep(dir_);
  spec.set_priority(3);
  EXPECT_TRUE(Submit(kBob, spec).ok());
  spec.set_preemptible(false);
  for (xmod::v1::GridSpec& grid : *spec.mutable_grids()) grid.set_preemptible(true);
  EXPECT_TRUE(Submit(kBob, spec).ok());
  spec.set_priority(5);
  spec.mutable_grids(0)->clear_preemptible();
  EXPECT_TRUE(Submit(kAlice, spec).ok());
  // The usage table shows what each user is granted.
  xmod::v1::GetUsageResponse usage;
  ASSERT_TRUE(stub_->GetUsage(BearerContext(kAlice).get(), {}, &usage).ok());
  std::map<std::string, xmod::v1::UserUsage> users;
  for (const xmod::v1::UserUsage& u : usage.users()) users[u.user()] = u;
  EXPECT_EQ(users["bob"].max_priority(), 3);
  EXPECT_FALSE(users["bob"].allow_non_preemptible());
  EXPECT_EQ(users["alice"].max_priority(), 5);
  EXPECT_TRUE(users["alice"].allow_non_preemptible());
}

TEST_F(CeilingsTest, BorrowedSlotsComeBackEvenFromNonPreemptibleRuns) {
  scheduling::SharingPolicy sharing;
  sharing.users["alice"].cpu_slots = 1;
  sharing.users["bob"].cpu_slots = 1;
  sharing.min_run_ms = 0;
  Start(sharing);
  // Bob fills the idle cluster with non-preemptible runs: one within his quota, one borrowed.
  xmod::v1::SweepSpec pinned = TinySweep(dir_);
  pinned.set_preemptible(false);
  xmod::v1::SubmitSweepResponse bob;
  ASSERT_TRUE(Submit(kBob, pinned, false, &bob).ok());
  xmod::v1::RegisterResponse registered;
  ASSERT_TRUE(
      worker_->Register(BearerContext(kWorker).get(), CpuWorker("w1", 2), &registered).ok());
  std::map<int64_t, int> bobs_attempts;  // run id -> attempt
  for (int slot : {0, 1}) {
    xmod::v1::AcquireRunRequest acquire;
    acquire.set_worker_id(registered.worker_id());
    acquire.add_free_slots(slot);
    xmod::v1::AcquireRunResponse leased;
    ASSERT_TRUE(worker_->AcquireRun(BearerContext(kWorker).get(), acquire, &leased).ok());
    ASSERT_TRUE(leased.has_assignment());
    bobs_attempts[leased.assignment().run_id()] = leased.assignment().attempt();
  }
  // Alice, within her quota, queues a run: one of bob's borrowed slots comes back.
  xmod::v1::SubmitSweepResponse alice;
  ASSERT_TRUE(Submit(kAlice, TinySweep(dir_), false, &alice).ok());
  EXPECT_EQ(coordinator_->scheduler()->Preempt(), 1);
  EXPECT_EQ(coordinator_->scheduler()->Preempt(), 0);  // the order stands; no second victim

  int ordered = 0;
  for (const auto& [run_id, attempt] : bobs_attempts) {
    xmod::v1::GetRunRequest get;
    get.set_run_id(run_id);
    xmod::v1::GetRunResponse run;
    ASSERT_TRUE(stub_->GetRun(BearerContext(kAlice).get(), get, &run).ok());
    EXPECT_FALSE(run.sharing().preemptible());
    for (const xmod::v1::Preemption& p : run.sharing().preemptions()) {
      ++ordered;
      EXPECT_EQ(p.attempt(), attempt);
      EXPECT_THAT(p.reason(), HasSubstr("user \"alice\""));
      EXPECT_THAT(p.reason(), HasSubstr("holds 1 cpu slots beyond its quota of 1"));
    }
  }
  EXPECT_EQ(ordered, 1);
  xmod::v1::ListEventsRequest by_alice;
  by_alice.set_actor("alice");
  xmod::v1::ListEventsResponse events;
  ASSERT_TRUE(stub_->ListEvents(BearerContext(kOps).get(), by_alice, &events).ok());
  ASSERT_GE(events.events_size(), 2);
  EXPECT_EQ(events.events(0).kind(), "run_preempt_ordered");
  EXPECT_EQ(events.events(1).kind(), "sweep_submitted");
}

}  // namespace
}  // namespace xmod
