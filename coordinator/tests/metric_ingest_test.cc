// MetricIngest (metric_ingest.h) as the Scheduler drives it: a batch is stored and
// acknowledged against the ingest's own table of live attempts; a batch that arrives while
// its attempt's end is being committed waits for the outcome (stale once the end is stored,
// stored when the end is refused); an end whose attempt still has a batch being written is
// told so and, queued behind it in the store's bulk lane, finds its points stored; a
// cancelled run's batches are stored and called stale;
// another worker's batch is stale and stores nothing; acknowledgements survive a restart.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/tests/test_util.h"

namespace xmod {
namespace {

class MetricIngestTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("ingest");
    Open();
    xmod::v1::SweepSpec spec = TinySweep(dir_);
    absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
    ASSERT_TRUE(runs.ok()) << runs.status();
    ASSERT_TRUE(scheduler_->SubmitSweep(spec, &*runs).ok());
    absl::StatusOr<xmod::v1::RegisterResponse> r = scheduler_->Register(CpuWorker("w1", 1));
    ASSERT_TRUE(r.ok()) << r.status();
    worker_ = r->worker_id();
    std::optional<xmod::v1::Assignment> a = AcquireNow(*scheduler_, worker_, {0});
    ASSERT_TRUE(a.has_value());
    run_id_ = a->run_id();
  }

  void Open() {
    store_ = OpenStore(dir_ + "/x.db");
    ASSERT_NE(store_, nullptr);
    SchedulerOptions options;
    options.checkpoint_root = dir_ + "/ckpt";
    ingest_ = std::make_unique<MetricIngest>(store_.get(), &feed_, nullptr, 8);
    absl::StatusOr<std::unique_ptr<Scheduler>> s =
        Scheduler::Create(store_.get(), &clock_, &feed_, nullptr, ingest_.get(), options);
    ASSERT_TRUE(s.ok()) << s.status();
    scheduler_ = *std::move(s);
  }

  // `n` train/loss points of attempt 1 from seq `first`, sent by `worker`.
  xmod::v1::ReportMetricsRequest Batch(int64_t first, int n, int64_t worker) const {
    xmod::v1::ReportMetricsRequest request;
    request.set_worker_id(worker);
    request.set_run_id(run_id_);
    request.set_attempt(1);
    request.set_first_seq(first);
    for (int i = 0; i < n; ++i) {
      xmod::v1::MetricPoint* p = request.add_points();
      p->set_name("train/loss");
      p->set_step(first + i + 1);
      p->set_flops((first + i + 1) * 1e9);
      p->set_value(5.0 - 0.1 * i);
    }
    return request;
  }

  int64_t StoredPoints() {
    absl::StatusOr<QueryResult> r = store_->Query(
        absl::StrCat("SELECT COUNT(*) FROM metrics WHERE run_id = ", run_id_), 1, QueryLimits{});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::stoll(r->rows[0][0]) : -1;
  }

  // Sends `request` from another thread once the attempt's end is in flight (BeginClose),
  // waits until the report is held back, resolves the end with `committed` and returns the
  // report's reply.
  xmod::v1::ReportMetricsResponse ReportDuringClose(const xmod::v1::ReportMetricsRequest& request,
                                                    bool committed) {
    MetricIngest& ingest = *ingest_;
    const scheduling::AttemptKey key{run_id_, 1};
    ingest.BeginClose({key});
    absl::StatusOr<xmod::v1::ReportMetricsResponse> reply;
    std::thread reporter([&] { reply = ingest.ReportMetrics(request); });
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (ingest.WaitingForClose() == 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    EXPECT_EQ(ingest.WaitingForClose(), 1) << "the report was not held back by the end";
    ingest.EndClose({key}, committed);
    reporter.join();
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : xmod::v1::ReportMetricsResponse();
  }

  std::string dir_;
  FakeClock clock_;
  ChangeFeed feed_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<MetricIngest> ingest_;  // outlives the scheduler
  std::unique_ptr<Scheduler> scheduler_;
  int64_t worker_ = 0;
  int64_t run_id_ = 0;
};

TEST_F(MetricIngestTest, StoresAndAcknowledgesTheCurrentAttemptsPoints) {
  absl::StatusOr<xmod::v1::ReportMetricsResponse> ack =
      ingest_->ReportMetrics(Batch(0, 4, worker_));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->acked_seq(), 3);
  EXPECT_FALSE(ack->stale());
  EXPECT_EQ(StoredPoints(), 4);
  EXPECT_EQ(ingest_->AckedSeq({run_id_, 1}), 3);
}

TEST_F(MetricIngestTest, AnotherWorkersBatchIsStaleAndStoresNothing) {
  absl::StatusOr<xmod::v1::ReportMetricsResponse> ack =
      ingest_->ReportMetrics(Batch(0, 4, worker_ + 1));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->stale());
  EXPECT_EQ(ack->acked_seq(), 3);
  EXPECT_EQ(StoredPoints(), 0);
}

TEST_F(MetricIngestTest, ABatchDuringAStoredEndIsStaleAndStoresNothing) {
  const xmod::v1::ReportMetricsResponse reply = ReportDuringClose(Batch(0, 4, worker_), true);
  EXPECT_TRUE(reply.stale());
  EXPECT_EQ(StoredPoints(), 0);
}

TEST_F(MetricIngestTest, ABatchDuringARefusedEndIsStored) {
  const xmod::v1::ReportMetricsResponse reply = ReportDuringClose(Batch(0, 4, worker_), false);
  EXPECT_FALSE(reply.stale());
  EXPECT_EQ(reply.acked_seq(), 3);
  EXPECT_EQ(StoredPoints(), 4);
}

TEST_F(MetricIngestTest, AnEndQueuedBehindABatchStillBeingWrittenFindsItsPointsStored) {
  const scheduling::AttemptKey key{run_id_, 1};
  // Nothing is being written: the end needs no bulk lane (refused here: the attempt stays).
  EXPECT_FALSE(ingest_->BeginClose({key}));
  ingest_->EndClose({key}, false);
  // The store's writer is held while a batch of the attempt is queued.
  std::promise<void> running;
  std::promise<void> release;
  std::future<absl::Status> held = store_->Write([&](Db&) {
    running.set_value();
    release.get_future().wait();
    return absl::OkStatus();
  });
  running.get_future().wait();
  absl::StatusOr<xmod::v1::ReportMetricsResponse> reply;
  std::thread reporter([&] { reply = ingest_->ReportMetrics(Batch(0, 5, worker_)); });
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (ingest_->WritesInFlight() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(ingest_->WritesInFlight(), 1);
  EXPECT_TRUE(ingest_->BeginClose({key}));
  int64_t points_at_end = -1;
  std::future<absl::Status> end = store_->WriteBulk([&](Db& db) {
    absl::StatusOr<Stmt> count = db.Prepare(
        absl::StrCat("SELECT COUNT(*) FROM metrics WHERE run_id = ", run_id_, " AND attempt = 1"));
    if (!count.ok()) return count.status();
    if (absl::StatusOr<bool> row = count->Step(); !row.ok()) return row.status();
    points_at_end = count->Int(0);
    return absl::OkStatus();
  });
  release.set_value();
  EXPECT_TRUE(held.get().ok());
  EXPECT_TRUE(end.get().ok());
  ingest_->EndClose({key}, true);
  reporter.join();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->acked_seq(), 4);
  EXPECT_EQ(points_at_end, 5);
}

TEST_F(MetricIngestTest, ACancelledRunsPointsAreStoredAndCalledStale) {
  ASSERT_TRUE(scheduler_->CancelRun(run_id_, kTestActor).ok());
  absl::StatusOr<xmod::v1::ReportMetricsResponse> ack =
      ingest_->ReportMetrics(Batch(0, 2, worker_));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->stale());
  EXPECT_EQ(ack->acked_seq(), 1);
  EXPECT_EQ(StoredPoints(), 2);
}

TEST_F(MetricIngestTest, AcknowledgementsSurviveARestart) {
  ASSERT_TRUE(ingest_->ReportMetrics(Batch(0, 3, worker_)).ok());
  scheduler_.reset();
  ingest_.reset();
  store_.reset();
  Open();
  EXPECT_EQ(ingest_->AckedSeq({run_id_, 1}), 2);
  // The next batch follows on from the acknowledgement the database restored.
  absl::StatusOr<xmod::v1::ReportMetricsResponse> ack =
      ingest_->ReportMetrics(Batch(3, 2, worker_));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->acked_seq(), 4);
}

}  // namespace
}  // namespace xmod
