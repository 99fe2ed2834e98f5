// Table tests of gang placement (coordinator/scheduling/placement.h), the pure core of the
// scheduler's policy: each row is a small queue, the workers and the clock, and the
// placement, reservations and backfill the policy must answer with. The rules come from
// scheduler.h ("Policy"), as scheduler_test.cc and gang_scheduler_test.cc exercise them
// end to end.
#include "coordinator/scheduling/placement.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/scheduling/live_state.h"
#include "gtest/gtest.h"

namespace xmod::scheduling {
namespace {

constexpr int64_t kNow = 100000;
constexpr int64_t kLeaseTtl = 10000;
constexpr int64_t kHeartbeat = 2000;

// A worker as a row gives it.
struct WorkerRowSpec {
  int64_t id = 0;
  int slots = 1;              // slots it has
  std::vector<int32_t> free;  // slots free now
  int32_t port_first = 0;     // rendezvous ports it declared (0 = none)
  int32_t port_last = 0;
  bool polling = true;      // false: stopped polling long ago
  int64_t seen_ago_ms = 0;  // since its last heartbeat
};

WorkerEntry WorkerOf(const WorkerRowSpec& spec) {
  WorkerEntry worker;
  worker.name = absl::StrCat("w", spec.id);
  worker.host = absl::StrCat("h", spec.id);
  for (int i = 0; i < spec.slots; ++i) worker.slots.emplace_back().set_index(i);
  worker.free_slots = spec.free;
  worker.port_first = spec.port_first;
  worker.port_last = spec.port_last;
  worker.polling = spec.polling ? 1 : 0;
  worker.poll_ended_ms = spec.polling ? kNow : kNow - 10 * kHeartbeat;
  worker.last_seen_ms = kNow - spec.seen_ago_ms;
  return worker;
}

QueuedRun Single(int64_t run_id, int slots = 1, int64_t not_before_ms = 0) {
  return QueuedRun{run_id, not_before_ms, 1, slots};
}
QueuedRun Gang(int64_t run_id, int members, int slots_per_member = 1) {
  return QueuedRun{run_id, 0, members, slots_per_member};
}

std::string Describe(const PlacementPlan& plan) {
  std::string out = "placement: ";
  if (plan.placement) {
    absl::StrAppend(&out, "run ", plan.placement->run_id, " port ", plan.placement->port, " on");
    for (const auto& [worker, slots] : plan.placement->members) {
      absl::StrAppend(&out, " ", worker, "[", absl::StrJoin(slots, ","), "]");
    }
  } else {
    out += "none";
  }
  absl::StrAppend(&out, "; backfill ", plan.backfill, "; reservations:");
  for (const Reservation& r : plan.reservations) {
    absl::StrAppend(&out, " run ", r.run_id, " holds {", absl::StrJoin(r.workers, ","), "}");
  }
  absl::StrAppend(&out, "; next ready ", plan.next_ready_ms);
  return out;
}

struct Row {
  std::string name;
  std::vector<QueuedRun> queue;  // in queue order
  std::vector<WorkerRowSpec> workers;
  int64_t poller = 1;
  std::set<std::string> held;  // rendezvous addresses open gangs hold
  PlacementPlan expected;
};

PlacementPlan Placed(Placement placement, bool backfill = false,
                     std::vector<Reservation> reservations = {}) {
  PlacementPlan plan;
  plan.placement = std::move(placement);
  plan.backfill = backfill;
  plan.reservations = std::move(reservations);
  return plan;
}
PlacementPlan Nothing(std::vector<Reservation> reservations = {}, int64_t next_ready_ms = -1) {
  PlacementPlan plan;
  plan.reservations = std::move(reservations);
  plan.next_ready_ms = next_ready_ms;
  return plan;
}

PlacementPlan Plan(const Row& row) {
  std::map<int64_t, WorkerEntry> workers;
  for (const WorkerRowSpec& w : row.workers) workers[w.id] = WorkerOf(w);
  return PlanPlacement(row.queue, workers, row.held,
                       PlacementClock{row.poller, kNow, kLeaseTtl, kHeartbeat});
}

// Single-worker runs: on the poller only.
std::vector<Row> SingleWorkerRows() {
  std::vector<Row> rows;
  rows.push_back({"single run takes the poller's first free slot",
                  {Single(7)},
                  {{1, 2, {1, 0}}},
                  1,
                  {},
                  Placed({7, {{1, {1}}}, 0})});
  rows.push_back({"a multi-slot run takes the first free slots it needs",
                  {Single(7, 2)},
                  {{1, 3, {0, 2, 1}}},
                  1,
                  {},
                  Placed({7, {{1, {0, 2}}}, 0})});
  rows.push_back({"a run that fits the worker but not its free slots reserves it",
                  {Single(7, 2), Single(8, 1)},
                  {{1, 2, {0}}},
                  1,
                  {},
                  Nothing({{7, {1}}})});
  rows.push_back({"a run bigger than the worker waits for a bigger one; the next is placed",
                  {Single(7, 4), Single(8, 1)},
                  {{1, 2, {0, 1}}},
                  1,
                  {},
                  Placed({8, {{1, {0}}}, 0})});
  rows.push_back({"a run in backoff is passed over; next_ready is the earliest backoff end",
                  {Single(7, 1, kNow + 500), Single(8, 1, kNow + 300), Single(9)},
                  {{1, 1, {0}}},
                  1,
                  {},
                  [] {
                    PlacementPlan p = Placed({9, {{1, {0}}}, 0});
                    p.next_ready_ms = kNow + 300;
                    return p;
                  }()});
  rows.push_back({"every run in backoff: nothing, and when the first is ready",
                  {Single(7, 1, kNow + 500), Single(8, 1, kNow + 300)},
                  {{1, 1, {0}}},
                  1,
                  {},
                  Nothing({}, kNow + 300)});
  rows.push_back({"a busy poller (no free slot) reserves itself for the head run",
                  {Single(7), Single(8)},
                  {{1, 1, {}}},
                  1,
                  {},
                  Nothing({{7, {1}}})});
  return rows;
}

std::vector<Row> GangRows() {
  std::vector<Row> rows;
  rows.push_back({"a gang of 2 spans the poller (member 0, with its first port) and another",
                  {Gang(7, 2)},
                  {{1, 1, {0}, 5000, 5001}, {2, 1, {0}, 6000, 6000}},
                  1,
                  {},
                  Placed({7, {{1, {0}}, {2, {0}}}, 5000})});
  rows.push_back({"a gang of 3 with 2 slots on each member",
                  {Gang(7, 3, 2)},
                  {{1, 2, {0, 1}, 5000, 5000}, {2, 2, {1, 0}}, {3, 4, {3, 2, 1}}},
                  2,
                  {},
                  Placed({7, {{1, {0, 1}}, {2, {1, 0}}, {3, {3, 2}}}, 5000})});
  rows.push_back({"member 0 is the first ready worker with a port when the poller has none",
                  {Gang(7, 2)},
                  {{1, 1, {0}}, {2, 1, {0}, 6000, 6000}},
                  1,
                  {},
                  Placed({7, {{2, {0}}, {1, {0}}}, 6000})});
  rows.push_back({"a held port is skipped for the next of the range",
                  {Gang(7, 2)},
                  {{1, 1, {0}, 5000, 5001}, {2, 1, {0}}},
                  1,
                  {"tcp://h1:5000"},
                  Placed({7, {{1, {0}}, {2, {0}}}, 5001})});
  rows.push_back({"no free port: the gang waits, reserves its workers, and blocks the poller",
                  {Gang(7, 2), Single(8)},
                  {{1, 1, {0}, 5000, 5000}, {2, 1, {0}}},
                  1,
                  {"tcp://h1:5000"},
                  Nothing({{7, {1, 2}}})});
  return rows;
}

// Reservation of the head gang, and backfill of runs that fit outside it.
std::vector<Row> ReservationRows() {
  std::vector<Row> rows;
  rows.push_back({"the head gang reserves the workers closest to fitting; the poller backfills",
                  {Gang(7, 2, 2), Single(8)},
                  {{1, 2, {0}, 5000, 5000}, {2, 2, {0}}, {3, 2, {0, 1}, 5000, 5000}},
                  2,
                  {},
                  Placed({8, {{2, {0}}}, 0}, true, {{7, {3, 1}}})});
  rows.push_back({"a reserved poller takes nothing from behind the head gang",
                  {Gang(7, 2, 2), Single(8)},
                  {{1, 2, {0}, 5000, 5000}, {2, 2, {0}}, {3, 2, {0, 1}, 5000, 5000}},
                  1,
                  {},
                  Nothing({{7, {3, 1}}})});
  rows.push_back({"a later gang reserves only workers the earlier one did not",
                  {Gang(7, 2), Gang(8, 2), Gang(9, 2)},
                  {{1, 1, {}}, {2, 1, {}}, {3, 1, {}}, {4, 1, {}}, {5, 1, {}}},
                  5,
                  {},
                  Nothing({{7, {1, 2}}, {8, {3, 4}}})});
  rows.push_back({"a gang backfills on workers outside the head gang's reservation",
                  {Gang(7, 2, 2), Gang(8, 2)},
                  {{1, 2, {0}}, {2, 2, {0}}, {3, 1, {0}, 5000, 5000}, {4, 1, {0}}},
                  3,
                  {},
                  Placed({8, {{3, {0}}, {4, {0}}}, 5000}, true, {{7, {1, 2}}})});
  rows.push_back({"a gang larger than the cluster reserves nothing; smaller runs go on",
                  {Gang(7, 3), Single(8)},
                  {{1, 1, {0}}, {2, 1, {0}}},
                  1,
                  {},
                  Placed({8, {{1, {0}}}, 0})});
  return rows;
}

// Workers that are not ready, not live or too small.
std::vector<Row> ExcludedWorkerRows() {
  std::vector<Row> rows;
  rows.push_back({"a worker that stopped polling is not ready: the gang reserves instead",
                  {Gang(7, 2)},
                  {{1, 1, {0}, 5000, 5000}, {2, 1, {0}, 0, 0, false}},
                  1,
                  {},
                  Nothing({{7, {1, 2}}})});
  rows.push_back({"a worker not seen within the lease TTL is not counted at all",
                  {Gang(7, 2), Single(8)},
                  {{1, 1, {0}, 5000, 5000}, {2, 1, {0}, 0, 0, true, kLeaseTtl + 1}},
                  1,
                  {},
                  Placed({8, {{1, {0}}}, 0})});
  rows.push_back({"a worker with fewer slots than a member needs is not counted",
                  {Gang(7, 2, 2), Single(8)},
                  {{1, 2, {0, 1}, 5000, 5000}, {2, 1, {0}}},
                  1,
                  {},
                  Placed({8, {{1, {0}}}, 0})});
  return rows;
}

void ExpectPlans(const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    const PlacementPlan plan = Plan(row);
    EXPECT_EQ(Describe(plan), Describe(row.expected)) << row.name;
    EXPECT_EQ(plan.placement, row.expected.placement) << row.name;
    EXPECT_EQ(plan.reservations, row.expected.reservations) << row.name;
  }
}

TEST(PlacementTest, SingleWorkerRuns) { ExpectPlans(SingleWorkerRows()); }
TEST(PlacementTest, GangsAcrossWorkers) { ExpectPlans(GangRows()); }
TEST(PlacementTest, ReservationAndBackfill) { ExpectPlans(ReservationRows()); }
TEST(PlacementTest, ExcludedWorkers) { ExpectPlans(ExcludedWorkerRows()); }

TEST(PlacementTest, AGangWithoutAFreePortSaysWhy) {
  Row row{"", {Gang(7, 2)}, {{1, 1, {0}, 5000, 5000}, {2, 1, {0}}}, 1, {"tcp://h1:5000"}, {}};
  PlacementPlan plan = Plan(row);
  ASSERT_EQ(plan.pending_reasons.size(), 1u);
  EXPECT_EQ(plan.pending_reasons[0].first, 7);
  EXPECT_EQ(plan.pending_reasons[0].second,
            "waiting for a rendezvous port: every port of w1 (h1:5000-5000) is held by an open "
            "gang");
  row.workers[0].port_first = row.workers[0].port_last = 0;
  plan = Plan(row);
  ASSERT_EQ(plan.pending_reasons.size(), 1u);
  EXPECT_EQ(plan.pending_reasons[0].second,
            "waiting for a rendezvous port: no ready worker declares any (xmod-worker "
            "--rendezvous_ports)");
  // Placed, or waiting for workers rather than ports: no reason known.
  row.held.clear();
  row.workers[0].port_first = row.workers[0].port_last = 5000;
  plan = Plan(row);
  ASSERT_TRUE(plan.placement.has_value());
  ASSERT_EQ(plan.pending_reasons.size(), 1u);
  EXPECT_EQ(plan.pending_reasons[0].second, "");
}

TEST(PlacementTest, TheQueueOrdersByPriorityThenSweepThenRun) {
  RunEntry low;
  low.priority = 0;
  low.sweep_id = 1;
  RunEntry high = low;
  high.priority = 5;
  RunEntry later = low;
  later.sweep_id = 2;
  const std::set<QueueKey> queue = {QueueKeyOf(4, later), QueueKeyOf(3, low), QueueKeyOf(2, low),
                                    QueueKeyOf(9, high)};
  std::vector<int64_t> order;
  for (const QueueKey& key : queue) order.push_back(std::get<2>(key));
  EXPECT_EQ(order, (std::vector<int64_t>{9, 2, 3, 4}));
}

TEST(PlacementTest, RunShapesFollowRanksPerWorker) {
  xmod::v1::RunSpec spec;
  EXPECT_EQ(MembersNeeded(spec), 1);  // ranks 0 = 1
  EXPECT_EQ(SlotsPerMember(spec), 1);
  spec.mutable_training()->set_ranks(4);
  EXPECT_EQ(MembersNeeded(spec), 1);
  EXPECT_EQ(SlotsPerMember(spec), 4);
  spec.mutable_training()->set_ranks_per_worker(2);
  EXPECT_EQ(MembersNeeded(spec), 2);
  EXPECT_EQ(SlotsPerMember(spec), 2);
  spec.mutable_training()->set_ranks_per_worker(4);  // all on one worker
  EXPECT_EQ(MembersNeeded(spec), 1);
  EXPECT_EQ(SlotsPerMember(spec), 4);
}

}  // namespace
}  // namespace xmod::scheduling
