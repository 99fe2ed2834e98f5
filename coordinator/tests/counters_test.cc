// The lost-lease and out-of-memory counts live in the database (the counters table), written
// in the transaction that ends the attempt, and a restarted coordinator's Prometheus
// counters start from them.
#include <memory>
#include <string>

#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/store/store_writes.h"
#include "coordinator/tests/test_util.h"
#include "gtest/gtest.h"
#include "trainer_contract/exit_codes.h"

namespace xmod {
namespace {

// One coordinator process: its store, scheduler and metrics on the database in `dir`.
struct Life {
  explicit Life(const std::string& dir) {
    absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(dir + "/x.db", StoreOptions{});
    EXPECT_TRUE(opened.ok()) << opened.status();
    store = *std::move(opened);
    SchedulerOptions options;
    options.lease_ttl_ms = 10000;
    options.checkpoint_root = dir + "/ckpt";
    ingest = std::make_unique<MetricIngest>(store.get(), &feed, &metrics, 8);
    absl::StatusOr<std::unique_ptr<Scheduler>> created =
        Scheduler::Create(store.get(), &clock, &feed, &metrics, ingest.get(), options);
    EXPECT_TRUE(created.ok()) << created.status();
    scheduler = *std::move(created);
  }

  double Counter(const std::string& name) {
    for (const prometheus::MetricFamily& family : metrics.registry()->Collect()) {
      if (family.name == name && !family.metric.empty()) return family.metric[0].counter.value;
    }
    return -1;
  }

  int64_t Stored(const std::string& name) {
    int64_t value = -1;
    absl::Status s = store->Read([&](Db& db) {
      absl::StatusOr<Stmt> stmt = db.Prepare("SELECT value FROM counters WHERE name = ?");
      if (!stmt.ok()) return stmt.status();
      stmt->Bind(1, name);
      absl::StatusOr<bool> row = stmt->Step();
      if (!row.ok()) return row.status();
      if (*row) value = stmt->Int(0);
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
    return value;
  }

  // The worker's next run ends out of memory.
  void RunOutOfMemory(int64_t worker) {
    std::optional<xmod::v1::Assignment> a = AcquireNow(*scheduler, worker, {0});
    ASSERT_TRUE(a.has_value());
    xmod::v1::FinishRunRequest oom;
    oom.set_worker_id(worker);
    oom.set_run_id(a->run_id());
    oom.set_attempt(a->attempt());
    oom.set_outcome(xmod::v1::OUTCOME_FAILED);
    oom.set_exit_code(kExitOutOfMemory);
    ASSERT_TRUE(scheduler->FinishRun(oom).ok());
  }

  // The worker's next run loses its lease.
  void LoseLease(int64_t worker) {
    ASSERT_TRUE(AcquireNow(*scheduler, worker, {0}).has_value());
    clock.Advance(10001);
    EXPECT_EQ(scheduler->ExpireLeases(), 1);
  }

  FakeClock clock;
  ChangeFeed feed;
  CoordinatorMetrics metrics;
  std::unique_ptr<Store> store;
  std::unique_ptr<MetricIngest> ingest;  // outlives the scheduler
  std::unique_ptr<Scheduler> scheduler;
};

TEST(CountersTest, LostLeasesAndOutOfMemoryExitsSurviveACoordinatorRestart) {
  const std::string dir = NewTestDir("counters");
  {
    Life first(dir);
    xmod::v1::SweepSpec spec = TinySweep(dir);
    absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
    ASSERT_TRUE(runs.ok()) << runs.status();
    ASSERT_TRUE(first.scheduler->SubmitSweep(spec, &*runs).ok());
    const int64_t worker = first.scheduler->Register(CpuWorker("w1", 1))->worker_id();
    first.RunOutOfMemory(worker);
    first.LoseLease(worker);
    EXPECT_EQ(first.Stored(kOomExitsCounter), 1);
    EXPECT_EQ(first.Stored(kLeasesLostCounter), 1);
    EXPECT_EQ(first.Counter("xmod_oom_exits_total"), 1);
    EXPECT_EQ(first.Counter("xmod_leases_expired_total"), 1);
  }
  Life second(dir);
  EXPECT_EQ(second.Counter("xmod_oom_exits_total"), 1);
  EXPECT_EQ(second.Counter("xmod_leases_expired_total"), 1);
  const int64_t worker = second.scheduler->Register(CpuWorker("w1", 1))->worker_id();
  second.LoseLease(worker);
  EXPECT_EQ(second.Stored(kLeasesLostCounter), 2);
  EXPECT_EQ(second.Counter("xmod_leases_expired_total"), 2);
  EXPECT_EQ(second.Counter("xmod_oom_exits_total"), 1);
}

}  // namespace
}  // namespace xmod
