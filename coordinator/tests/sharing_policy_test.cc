// Table tests of the sharing policy's pure parts: the sharing config's validation
// (coordinator/scheduling/sharing_config.h), the share order of the queue (share_order.h:
// quotas, borrowing, weighted fair share) and the choice of preemption victims
// (preemption.h: priority, quota reclaim, hysteresis, preemptible, fewest victims).
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/field_path.h"
#include "common/files.h"
#include "coordinator/scheduling/preemption.h"
#include "coordinator/scheduling/share_order.h"
#include "coordinator/scheduling/sharing_config.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace xmod::scheduling {
namespace {

constexpr int64_t kNow = 1000000;

QueuedRun Queued(int64_t id, const std::string& user, int priority = 0, int slots = 1,
                 int members = 1) {
  QueuedRun run;
  run.run_id = id;
  run.user = user;
  run.priority = priority;
  run.slots_per_member = slots;
  run.members = members;
  return run;
}

std::string Ids(const std::vector<QueuedRun>& queue) {
  std::vector<std::string> ids;
  for (const QueuedRun& run : queue) {
    ids.push_back(absl::StrCat(run.run_id, run.borrowing ? "b" : ""));
  }
  return absl::StrJoin(ids, " ");
}

SharingPolicy Quotas(int a, int b) {
  SharingPolicy policy;
  policy.users["a"].cpu_slots = a;
  policy.users["b"].cpu_slots = b;
  return policy;
}

// --- Config ----------------------------------------------------------------------------

TEST(SharingConfigTest, RefusalsNameTheField) {
  struct Case {
    std::string text;
    std::string path;
  };
  const std::vector<Case> cases = {
      {R"(users { name: "" })", "users[0].name"},
      {R"(users { name: "a b" })", "users[0].name"},
      {R"(users { name: "a" } users { name: "a" })", "users[1].name"},
      {R"(users { name: "a" cpu_slots: -1 })", "users[0].cpu_slots"},
      {R"(users { name: "a" gpu_slots: -2 })", "users[0].gpu_slots"},
      {R"(users { name: "a" weight: 0 })", "users[0].weight"},
      {R"(users { name: "a" weight: inf })", "users[0].weight"},
      {R"(default_weight: -1)", "default_weight"},
      {R"(min_run_ms: -5)", "min_run_ms"},
      {R"(groups { name: "" members: "a" })", "groups[0].name"},
      {R"(groups { name: "g" })", "groups[0].members"},
      {R"(groups { name: "g" members: "a" members: "a b" })", "groups[0].members[1]"},
      {R"(groups { name: "g" members: "a" members: "a" })", "groups[0].members[1]"},
      {R"(groups { name: "g" members: "a" } groups { name: "g" members: "b" })", "groups[1].name"},
  };
  for (const Case& c : cases) {
    xmod::v1::SharingConfig config;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(c.text, &config)) << c.text;
    absl::Status status = ValidateSharingConfig(config);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(FieldPathOf(status).value_or(""), c.path) << c.text << ": " << status;
  }
}

TEST(SharingConfigTest, LoadsQuotasWeightsAndDefaults) {
  const std::string path = ::testing::TempDir() + "/sharing.txtpb";
  ASSERT_TRUE(WriteFileAtomic(path,
                              "users { name: \"alice\" gpu_slots: 2 cpu_slots: 4 weight: 3 }\n"
                              "users { name: \"bob\" }\n"
                              "default_weight: 0.5\nmin_run_ms: 250\n")
                  .ok());
  absl::StatusOr<SharingPolicy> policy = LoadSharingPolicy(path);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->For("alice").gpu_slots.value_or(-1), 2);
  EXPECT_EQ(policy->For("alice").Quota(xmod::v1::CPU).value_or(-1), 4);
  EXPECT_EQ(policy->For("alice").weight, 3);
  EXPECT_FALSE(policy->For("bob").gpu_slots.has_value());
  EXPECT_EQ(policy->For("bob").weight, 0.5);    // unset: the default weight
  EXPECT_EQ(policy->For("carol").weight, 0.5);  // not named
  EXPECT_EQ(policy->min_run_ms, 250);
  EXPECT_EQ(LoadSharingPolicy("")->users.size(), 0u);
}

TEST(SharingConfigTest, LoadsCeilingsAndGroups) {
  const std::string path = ::testing::TempDir() + "/ceilings.txtpb";
  ASSERT_TRUE(WriteFileAtomic(path,
                              "users { name: \"alice\" max_priority: 9 }\n"
                              "users { name: \"bob\" allow_non_preemptible: true }\n"
                              "default_max_priority: 2\ndefault_allow_non_preemptible: false\n"
                              "groups { name: \"nlp\" members: \"alice\" members: \"bob\" }\n"
                              "groups { name: \"ops\" members: \"carol\" }\n")
                  .ok());
  absl::StatusOr<SharingPolicy> policy = LoadSharingPolicy(path);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->For("alice").max_priority, 9);
  EXPECT_FALSE(policy->For("alice").allow_non_preemptible);  // unset: the default
  EXPECT_EQ(policy->For("bob").max_priority, 2);             // unset: the default
  EXPECT_TRUE(policy->For("bob").allow_non_preemptible);
  EXPECT_EQ(policy->For("dave").max_priority, 2);  // not named
  EXPECT_FALSE(policy->For("dave").allow_non_preemptible);
  EXPECT_EQ(policy->SharedGroup("alice", "bob"), "nlp");
  EXPECT_EQ(policy->SharedGroup("alice", "carol"), "");
  EXPECT_EQ(policy->SharedGroup("dave", "bob"), "");
  // Without a file: no ceilings, non-preemptible runs allowed, no groups.
  absl::StatusOr<SharingPolicy> open = LoadSharingPolicy("");
  EXPECT_FALSE(open->For("anyone").max_priority.has_value());
  EXPECT_TRUE(open->For("anyone").allow_non_preemptible);
}

TEST(SharingConfigTest, ParseErrorsNameFileAndLine) {
  const std::string path = ::testing::TempDir() + "/bad_sharing.txtpb";
  ASSERT_TRUE(WriteFileAtomic(path, "users { name: \"a\" }\nusers { nmae: \"b\" }\n").ok());
  absl::StatusOr<SharingPolicy> policy = LoadSharingPolicy(path);
  ASSERT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(policy.status().message().find(path + ": 2:"), std::string::npos) << policy.status();
  EXPECT_NE(policy.status().message().find("nmae"), std::string::npos) << policy.status();
}

// --- Share order -----------------------------------------------------------------------

TEST(ShareOrderTest, WithinQuotaFirstThenBorrowing) {
  // a holds its one slot: its runs only borrow; b is under its quota of 2.
  SlotsByUser in_use{{"a", {0, 1}}};
  const std::vector<QueuedRun> queue = {Queued(1, "a"), Queued(2, "a"), Queued(3, "b"),
                                        Queued(4, "b")};
  EXPECT_EQ(Ids(ShareOrder(queue, in_use, {}, xmod::v1::CPU, Quotas(1, 2))), "3 4 1b 2b");
  // GPU slots have no quota here: nobody borrows them.
  EXPECT_EQ(Ids(ShareOrder(queue, in_use, {}, xmod::v1::CUDA, Quotas(1, 2))), "1 3 2 4");
}

TEST(ShareOrderTest, EqualWeightsAlternateUsersFromTheirSlotsInUse) {
  const std::vector<QueuedRun> queue = {Queued(1, "a"), Queued(2, "a"), Queued(3, "a"),
                                        Queued(4, "b"), Queued(5, "b")};
  SharingPolicy policy;
  EXPECT_EQ(Ids(ShareOrder(queue, {}, {}, xmod::v1::CPU, policy)), "1 4 2 5 3");
  // b already holds two slots: a's runs go first until a catches up (then FIFO on the tie).
  SlotsByUser in_use{{"b", {0, 2}}};
  EXPECT_EQ(Ids(ShareOrder(queue, in_use, {}, xmod::v1::CPU, policy)), "1 2 3 4 5");
}

TEST(ShareOrderTest, TiesGoToTheUserThatUsedLess) {
  // One slot each in use: the user with fewer slot-milliseconds behind it goes first, even
  // though the other's run is older.
  const std::vector<QueuedRun> queue = {Queued(1, "a"), Queued(2, "b")};
  SlotsByUser in_use{{"a", {0, 1}}, {"b", {0, 1}}};
  EXPECT_EQ(Ids(ShareOrder(queue, in_use, {{"a", 9000}, {"b", 4000}}, xmod::v1::CPU, {})), "2 1");
  EXPECT_EQ(Ids(ShareOrder(queue, in_use, {}, xmod::v1::CPU, {})), "1 2");
}

TEST(ShareOrderTest, WeightsScaleTheShareAndPriorityComesFirst) {
  SharingPolicy policy;
  policy.users["a"].weight = 2;
  const std::vector<QueuedRun> queue = {Queued(9, "b", 5), Queued(1, "a"), Queued(2, "a"),
                                        Queued(3, "a"),    Queued(4, "b"), Queued(5, "b")};
  // Priority 5 first; then a (weight 2) gets two picks per pick of b.
  EXPECT_EQ(Ids(ShareOrder(queue, {}, {}, xmod::v1::CPU, policy)), "9 1 4 2 3 5");
}

// --- Preemption ------------------------------------------------------------------------

RunningAttempt Running(int64_t run_id, const std::string& user, int priority, int64_t worker,
                       int slots = 1) {
  RunningAttempt a;
  a.key = {run_id, 1};
  a.user = user;
  a.priority = priority;
  a.started_ms = kNow - 60000;
  a.members = {{worker, slots}};
  return a;
}

std::map<int64_t, WorkerRoom> FullWorkers(int n, int slots = 1) {
  std::map<int64_t, WorkerRoom> rooms;
  for (int i = 1; i <= n; ++i) rooms[i] = WorkerRoom{slots, 0, xmod::v1::CPU};
  return rooms;
}

SlotsByUser InUse(const std::vector<RunningAttempt>& running) {
  SlotsByUser in_use;
  for (const RunningAttempt& a : running) {
    for (const auto& [worker, slots] : a.members) in_use[a.user].cpu += slots;
  }
  return in_use;
}

std::string Victims(const std::vector<PreemptOrder>& orders) {
  std::vector<std::string> out;
  for (const PreemptOrder& o : orders) out.push_back(absl::StrCat(o.key.first, ":", o.cause));
  return absl::StrJoin(out, " ");
}

std::vector<PreemptOrder> Plan(const std::vector<QueuedRun>& queue,
                               const std::vector<RunningAttempt>& running,
                               const std::map<int64_t, WorkerRoom>& rooms,
                               const SharingPolicy& policy = SharingPolicy{}) {
  const SlotsByUser in_use = InUse(running);
  return PlanPreemptions(ShareOrder(queue, in_use, {}, xmod::v1::CPU, policy), running, rooms,
                         in_use, policy, kNow);
}

TEST(PreemptionTest, HigherPriorityTakesTheLowestPriorityMostRecentlyCheckpointed) {
  std::vector<RunningAttempt> running = {Running(1, "a", 0, 1), Running(2, "a", 0, 2),
                                         Running(3, "a", 1, 3)};
  running[0].checkpointed_ms = kNow - 30000;
  running[1].checkpointed_ms = kNow - 1000;  // least work lost
  const std::vector<PreemptOrder> orders = Plan({Queued(10, "b", 5)}, running, FullWorkers(3));
  EXPECT_EQ(Victims(orders), "2:priority");
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_NE(orders[0].reason.find("for run 10 (priority 5"), std::string::npos) << orders[0].reason;
  // Two claimants take two victims, lowest priority first.
  EXPECT_EQ(Victims(Plan({Queued(10, "b", 5), Queued(11, "b", 5)}, running, FullWorkers(3))),
            "2:priority 1:priority");
}

TEST(PreemptionTest, EqualPrioritiesNeverPreemptEachOther) {
  const std::vector<RunningAttempt> running = {Running(1, "a", 3, 1)};
  EXPECT_EQ(Victims(Plan({Queued(10, "b", 3)}, running, FullWorkers(1))), "");
}

TEST(PreemptionTest, YoungNotPreemptibleAndOrderedAttemptsAreSpared) {
  std::vector<RunningAttempt> running = {Running(1, "a", 0, 1), Running(2, "a", 0, 2),
                                         Running(3, "a", 0, 3)};
  running[0].started_ms = kNow - 100;  // just started or resumed
  running[1].preemptible = false;
  running[2].ordered = true;  // already stopping: its slot serves the first claimant
  EXPECT_EQ(Victims(Plan({Queued(10, "b", 5)}, running, FullWorkers(3))), "");
  EXPECT_EQ(Victims(Plan({Queued(10, "b", 5), Queued(11, "b", 5)}, running, FullWorkers(3))), "");
}

TEST(PreemptionTest, NothingIsPreemptedWhileASlotIsFree) {
  const std::vector<RunningAttempt> running = {Running(1, "a", 0, 1)};
  std::map<int64_t, WorkerRoom> rooms = FullWorkers(2);
  rooms[2].free = 1;
  EXPECT_EQ(Victims(Plan({Queued(10, "b", 5)}, running, rooms)), "");
  EXPECT_EQ(Victims(Plan({Queued(10, "b", 5), Queued(11, "b", 5)}, running, rooms)), "1:priority");
}

TEST(PreemptionTest, OwnersTakeBackBorrowedSlotsAtEqualPriority) {
  // a (quota 1) borrows two of three slots; b (quota 2) queues two runs.
  std::vector<RunningAttempt> running = {Running(1, "a", 0, 1), Running(2, "a", 0, 2),
                                         Running(3, "a", 0, 3)};
  running[1].started_ms = kNow - 50000;
  running[2].started_ms = kNow - 40000;  // the newest: the least work lost
  const std::vector<PreemptOrder> orders = Plan({Queued(10, "b"), Queued(11, "b"), Queued(12, "b")},
                                                running, FullWorkers(3), Quotas(1, 2));
  // Two victims only: a keeps its quota, and b's third run would borrow.
  EXPECT_EQ(Victims(orders), "3:quota 2:quota");
  ASSERT_FALSE(orders.empty());
  EXPECT_NE(orders[0].reason.find("beyond its quota of 1"), std::string::npos) << orders[0].reason;
  // A user's own runs are never taken back for its quota.
  EXPECT_EQ(Victims(Plan({Queued(10, "a")}, running, FullWorkers(3), Quotas(1, 2))), "");
}

TEST(PreemptionTest, BorrowedSlotsComeBackWhateverPreemptibleSays) {
  // a (quota 1) holds three slots of non-preemptible runs: two are borrowed.
  std::vector<RunningAttempt> running = {Running(1, "a", 0, 1), Running(2, "a", 0, 2),
                                         Running(3, "a", 0, 3)};
  for (RunningAttempt& a : running) a.preemptible = false;
  running[1].started_ms = kNow - 50000;
  running[2].started_ms = kNow - 40000;  // the newest: the least work lost
  EXPECT_EQ(Victims(Plan({Queued(10, "b"), Queued(11, "b"), Queued(12, "b")}, running,
                         FullWorkers(3), Quotas(1, 2))),
            "3:quota 2:quota");
  // Among a borrower's runs the preemptible ones go first.
  running[0].preemptible = true;
  EXPECT_EQ(Victims(Plan({Queued(10, "b")}, running, FullWorkers(3), Quotas(1, 2))), "1:quota");
  // A higher priority alone still never displaces a non-preemptible run within its quota.
  EXPECT_EQ(Victims(Plan({Queued(10, "b", 9)}, {running[1]}, FullWorkers(1), Quotas(1, 2))), "");
}

TEST(PreemptionTest, BorrowersNeverPreempt) {
  // b is at its quota of 1: its high-priority run would borrow, so it displaces nobody.
  const std::vector<RunningAttempt> running = {Running(1, "a", 0, 1), Running(2, "b", 0, 2)};
  EXPECT_EQ(Victims(Plan({Queued(10, "b", 9)}, running, FullWorkers(2), Quotas(5, 1))), "");
}

TEST(PreemptionTest, FewestVictimsAndGangsAsAWhole) {
  // Worker 1 holds two one-slot runs, worker 2 one two-slot gang member; a two-slot run
  // needs one worker: the gang (one victim) beats the two singles.
  RunningAttempt gang = Running(3, "a", 0, 2, 2);
  gang.members.emplace_back(4, 2);  // its other member
  const std::vector<RunningAttempt> running = {Running(1, "a", 0, 1), Running(2, "a", 0, 1), gang};
  EXPECT_EQ(Victims(Plan({Queued(10, "b", 5, 2)}, running, FullWorkers(4, 2))), "3:priority");
}

// --- Placement with borrowing ----------------------------------------------------------

TEST(PlacementSharingTest, BorrowingRunsNeverReserve) {
  std::map<int64_t, WorkerEntry> workers;
  WorkerEntry& w = workers[1];
  w.slots.resize(2);
  w.free_slots = {0};
  w.polling = 1;
  QueuedRun big = Queued(1, "a", 0, 2);
  QueuedRun small = Queued(2, "b", 0, 1);
  const PlacementClock clock{1, kNow, 10000, 2000};
  w.last_seen_ms = kNow;
  // Within its quota the two-slot run reserves the worker; borrowing, it lets the next pass.
  PlacementPlan held = PlanPlacement({big, small}, workers, {}, clock);
  EXPECT_FALSE(held.placement.has_value());
  big.borrowing = true;
  PlacementPlan passed = PlanPlacement({big, small}, workers, {}, clock);
  ASSERT_TRUE(passed.placement.has_value());
  EXPECT_EQ(passed.placement->run_id, 2);
}

}  // namespace
}  // namespace xmod::scheduling
