// Scheduler tests with a FakeClock: leasing, heartbeat renewal, failures -> requeue with
// backoff -> bounded attempts -> FAILED, lost leases requeued without using up attempts (up to
// their own bound), resume points with a fallback and refused checkpoints, metric acks,
// cancellation and kill orders, re-registration, and the state rebuilt after a restart.
#include "coordinator/scheduling/scheduler.h"

#include "absl/strings/str_cat.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/store_writes.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer_contract/exit_codes.h"

namespace xmod {
namespace {

using xmod::v1::RunState;

class SchedulerTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("sched");
    Open();
  }

  void Open() {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir_ + "/x.db", StoreOptions{});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    options_.lease_ttl_ms = 10000;
    options_.backoff_base_ms = 1000;
    options_.backoff_max_ms = 4000;
    options_.checkpoint_root = dir_ + "/ckpt";
    ingest_ = std::make_unique<MetricIngest>(store_.get(), &feed_, nullptr, 8);
    absl::StatusOr<std::unique_ptr<Scheduler>> s =
        Scheduler::Create(store_.get(), &clock_, &feed_, nullptr, ingest_.get(), options_);
    ASSERT_TRUE(s.ok()) << s.status();
    scheduler_ = *std::move(s);
  }

  void Restart() {
    scheduler_.reset();
    ingest_.reset();
    store_.reset();
    Open();
  }

  // Submits TinySweep with max_attempts and training.ranks; returns the run ids.
  std::vector<int64_t> Submit(int max_attempts = 3, int ranks = 0) {
    xmod::v1::SweepSpec spec = TinySweep(dir_);
    spec.set_max_attempts(max_attempts);
    spec.mutable_training()->set_ranks(ranks);
    absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
    EXPECT_TRUE(runs.ok()) << runs.status();
    absl::StatusOr<int64_t> sweep = scheduler_->SubmitSweep(spec, &*runs);
    EXPECT_TRUE(sweep.ok()) << sweep.status();
    std::vector<int64_t> ids;
    for (const auto& r : *runs) ids.push_back(r.id());
    return ids;
  }

  int64_t RegisterWorker(const std::string& name, int slots = 2) {
    xmod::v1::RegisterRequest request = CpuWorker(name, slots);
    absl::StatusOr<xmod::v1::RegisterResponse> r = scheduler_->Register(request);
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->lease_ttl_ms(), 10000);
    return r->worker_id();
  }

  std::optional<xmod::v1::Assignment> Acquire(int64_t worker,
                                              const std::vector<int32_t>& free_slots = {1}) {
    return AcquireNow(*scheduler_, worker, free_slots);
  }

  xmod::v1::Run Load(int64_t run_id) { return StoredRun(*store_, run_id); }

  std::vector<xmod::v1::Attempt> Attempts(int64_t run_id) {
    return StoredAttempts(*store_, run_id);
  }

  xmod::v1::HeartbeatResponse Beat(int64_t worker, const xmod::v1::Assignment& a) {
    xmod::v1::HeartbeatRequest request;
    request.set_worker_id(worker);
    xmod::v1::RunningAttempt* running = request.add_running();
    running->set_run_id(a.run_id());
    running->set_attempt(a.attempt());
    running->mutable_progress()->set_step(3);
    running->mutable_progress()->set_flops(3e9);
    absl::StatusOr<xmod::v1::HeartbeatResponse> r = scheduler_->Heartbeat(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }

  std::string dir_;
  FakeClock clock_;
  ChangeFeed feed_;
  SchedulerOptions options_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<MetricIngest> ingest_;  // outlives the scheduler
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, LeasesInQueueOrderAndFillsTheAssignment) {
  const std::vector<int64_t> runs = Submit();
  const int64_t worker = RegisterWorker("w1");
  std::optional<xmod::v1::Assignment> a = Acquire(worker);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->run_id(), runs[0]);
  EXPECT_EQ(a->attempt(), 1);
  EXPECT_EQ(a->spec().run_id(), runs[0]);
  EXPECT_EQ(a->spec().attempt(), 1);
  EXPECT_EQ(a->slots_size(), 1);
  EXPECT_EQ(a->slots(0), 1);
  EXPECT_FALSE(a->has_resume());
  EXPECT_NE(a->spec().checkpoint_dir().find("/run-"), std::string::npos);
  EXPECT_EQ(Load(runs[0]).state(), xmod::v1::RUNNING);
  EXPECT_EQ(Load(runs[0]).worker(), "w1");
  EXPECT_EQ(Acquire(worker)->run_id(), runs[1]);
  EXPECT_EQ(Acquire(worker)->run_id(), runs[2]);
  EXPECT_FALSE(Acquire(worker).has_value());  // queue empty
  // An unknown worker must register first.
  xmod::v1::AcquireRunRequest unknown;
  unknown.set_worker_id(999);
  unknown.add_free_slots(0);
  EXPECT_EQ(scheduler_->Acquire(unknown).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SchedulerTest, HeartbeatRenewsTheLease) {
  Submit();
  const int64_t worker = RegisterWorker("w1");
  auto a = Acquire(worker);
  ASSERT_TRUE(a.has_value());
  const int64_t first = *scheduler_->LeaseExpiry(a->run_id(), 1);
  clock_.Advance(8000);
  EXPECT_TRUE(Beat(worker, *a).orders().empty());
  EXPECT_EQ(*scheduler_->LeaseExpiry(a->run_id(), 1), first + 8000);
  clock_.Advance(8000);  // 16 s after the start, 8 s after the renewal
  EXPECT_EQ(scheduler_->ExpireLeases(), 0);
  EXPECT_EQ(Load(a->run_id()).state(), xmod::v1::RUNNING);
  EXPECT_EQ(Load(a->run_id()).progress().step(), 3);
}

TEST_F(SchedulerTest, FailuresRequeueWithBackoffUntilAttemptsRunOut) {
  const std::vector<int64_t> runs = Submit(/*max_attempts=*/3);
  const int64_t worker = RegisterWorker("w1");
  // Only the first run matters here: cancel the others.
  ASSERT_TRUE(scheduler_->CancelRun(runs[1], kTestActor).ok());
  ASSERT_TRUE(scheduler_->CancelRun(runs[2], kTestActor).ok());
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto a = Acquire(worker);
    ASSERT_TRUE(a.has_value()) << "attempt " << attempt;
    EXPECT_EQ(a->attempt(), attempt);
    xmod::v1::FinishRunRequest fail;
    fail.set_worker_id(worker);
    fail.set_run_id(a->run_id());
    fail.set_attempt(attempt);
    fail.set_outcome(xmod::v1::OUTCOME_FAILED);
    fail.set_exit_code(1);
    ASSERT_TRUE(scheduler_->FinishRun(fail).ok());
    const xmod::v1::Run run = Load(runs[0]);
    if (attempt < 3) {
      EXPECT_EQ(run.state(), xmod::v1::QUEUED);
      // Backoff: not leased again before base * 2^(attempt-1).
      EXPECT_FALSE(Acquire(worker).has_value());
      clock_.Advance(scheduler_->BackoffMillis(attempt) - 1);
      EXPECT_FALSE(Acquire(worker).has_value());
      clock_.Advance(1);
    } else {
      EXPECT_EQ(run.state(), xmod::v1::FAILED);
      EXPECT_NE(run.error().find("3 of 3 attempts failed"), std::string::npos) << run.error();
    }
  }
  EXPECT_EQ(scheduler_->BackoffMillis(1), 1000);
  EXPECT_EQ(scheduler_->BackoffMillis(2), 2000);
  EXPECT_EQ(scheduler_->BackoffMillis(5), 4000);  // capped
  const std::vector<xmod::v1::Attempt> attempts = Attempts(runs[0]);
  ASSERT_EQ(attempts.size(), 3u);
  for (const auto& a : attempts) EXPECT_EQ(a.outcome(), "failed");
  EXPECT_FALSE(Acquire(worker).has_value());
  // A stale worker's heartbeat for the ended attempt is told to kill it: it must not write a
  // checkpoint on its way out.
  xmod::v1::Assignment old;
  old.set_run_id(runs[0]);
  old.set_attempt(3);
  const xmod::v1::HeartbeatResponse beat = Beat(worker, old);
  ASSERT_EQ(beat.orders_size(), 1);
  EXPECT_EQ(beat.orders(0).action(), xmod::v1::KILL);
  // RetryFailed gives a fresh allowance.
  absl::StatusOr<std::vector<int64_t>> retried =
      scheduler_->RetryFailed(Load(runs[0]).sweep_id(), kTestActor);
  ASSERT_TRUE(retried.ok());
  EXPECT_EQ(retried->size(), 1u);
  auto again = Acquire(worker);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->attempt(), 4);
}

TEST_F(SchedulerTest, LostLeasesRequeueAtOnceWithoutUsingUpAttempts) {
  options_.max_lost_attempts = 2;
  Restart();
  const std::vector<int64_t> runs = Submit(/*max_attempts=*/1);
  const int64_t worker = RegisterWorker("w1");
  ASSERT_TRUE(scheduler_->CancelRun(runs[1], kTestActor).ok());
  ASSERT_TRUE(scheduler_->CancelRun(runs[2], kTestActor).ok());
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto a = Acquire(worker);  // no backoff after a lost lease
    ASSERT_TRUE(a.has_value()) << "attempt " << attempt;
    EXPECT_EQ(a->attempt(), attempt);
    EXPECT_EQ(a->lease_ttl_ms(), 10000);  // the worker fences its trainer with it
    clock_.Advance(10001);
    EXPECT_EQ(scheduler_->ExpireLeases(), 1);
    const xmod::v1::Run run = Load(runs[0]);
    if (attempt <= 2) {
      // One attempt allowed, yet a lost lease is not the run's failure.
      EXPECT_EQ(run.state(), xmod::v1::QUEUED) << run.error();
    } else {
      // Past max_lost_attempts the run fails rather than loop forever.
      EXPECT_EQ(run.state(), xmod::v1::FAILED);
      EXPECT_NE(run.error().find("lease expired"), std::string::npos) << run.error();
    }
  }
  for (const auto& a : Attempts(runs[0])) EXPECT_EQ(a.outcome(), "lost");
  // A worker re-registering without its attempt loses it the same way.
  ASSERT_TRUE(scheduler_->ResumeRun(runs[0], kTestActor).ok());
  auto a = Acquire(worker);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(RegisterWorker("w1"), worker);
  xmod::v1::HeartbeatRequest empty;
  empty.set_worker_id(worker);
  ASSERT_TRUE(scheduler_->Heartbeat(empty).ok());
  EXPECT_EQ(Attempts(runs[0]).back().outcome(), "lost");
  EXPECT_EQ(Load(runs[0]).state(), xmod::v1::QUEUED);
}

TEST_F(SchedulerTest, ARefusedCheckpointIsDroppedAndTheRetryFallsBack) {
  const std::vector<int64_t> runs = Submit();
  const int64_t worker = RegisterWorker("w1");
  auto a = Acquire(worker);
  ASSERT_TRUE(a.has_value());
  auto report = [&](int attempt, int step, const std::string& rejected) {
    xmod::v1::ReportCheckpointRequest c;
    c.set_worker_id(worker);
    c.set_run_id(a->run_id());
    c.set_attempt(attempt);
    c.set_step(step);
    c.set_path(absl::StrCat(a->spec().checkpoint_dir(), "/ckpt-a1-s", step, ".pt"));
    c.set_sha256(absl::StrCat("sha", step));
    c.set_rejected(rejected);
    return scheduler_->ReportCheckpoint(c);
  };
  for (int step : {10, 20, 30}) ASSERT_TRUE(report(1, step, "").ok());
  clock_.Advance(10001);
  ASSERT_EQ(scheduler_->ExpireLeases(), 1);
  std::optional<xmod::v1::Assignment> retry;
  for (int i = 0; i < 3 && (!retry || retry->run_id() != a->run_id()); ++i) retry = Acquire(worker);
  ASSERT_TRUE(retry.has_value());
  ASSERT_EQ(retry->run_id(), a->run_id());
  // The newest checkpoint with its digest, and the one before it as the fallback.
  EXPECT_EQ(retry->resume().step(), 30);
  EXPECT_EQ(retry->resume().sha256(), "sha30");
  ASSERT_EQ(retry->fallbacks_size(), 1);
  EXPECT_EQ(retry->fallbacks(0).step(), 20);
  EXPECT_EQ(retry->fallbacks(0).path(), a->spec().checkpoint_dir() + "/ckpt-a1-s20.pt");

  // Its trainer finds step 30 corrupt and falls back to step 20.
  ASSERT_TRUE(report(2, 30, "DATA_LOSS: checksum mismatch").ok());
  const xmod::v1::Attempt noted = Attempts(a->run_id()).back();
  EXPECT_EQ(noted.resumed_from_step(), 20);  // its metrics after step 20 supersede attempt 1's
  EXPECT_NE(noted.error().find("checksum mismatch"), std::string::npos) << noted.error();
  EXPECT_NE(noted.error().find("resumed from step 20"), std::string::npos) << noted.error();
  std::vector<xmod::v1::Checkpoint> stored;
  ASSERT_TRUE(store_
                  ->Read([&](Db& db) {
                    auto c = LoadCheckpoints(db, a->run_id());
                    if (c.ok()) stored = *c;
                    return c.status();
                  })
                  .ok());
  // Step 30 is never offered again, and step 10 was forgotten when step 30 was recorded
  // (the worker deleted its file then, keeping the two newest).
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored.back().step(), 20);
  std::vector<std::string> events;
  ASSERT_TRUE(store_
                  ->Read([&](Db& db) {
                    absl::StatusOr<Stmt> stmt =
                        db.Prepare("SELECT text FROM events WHERE kind = 'checkpoint_rejected'");
                    if (!stmt.ok()) return stmt.status();
                    while (true) {
                      absl::StatusOr<bool> row = stmt->Step();
                      if (!row.ok()) return row.status();
                      if (!*row) return absl::OkStatus();
                      events.push_back(stmt->Text(0));
                    }
                  })
                  .ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0].find("step 30"), std::string::npos) << events[0];

  // The attempt ends; the note stays on it, and the next retry starts at step 20.
  xmod::v1::FinishRunRequest ok;
  ok.set_worker_id(worker);
  ok.set_run_id(a->run_id());
  ok.set_attempt(2);
  ok.set_outcome(xmod::v1::OUTCOME_PREEMPTED);
  ASSERT_TRUE(scheduler_->FinishRun(ok).ok());
  EXPECT_NE(Attempts(a->run_id()).back().error().find("refused at resume"), std::string::npos);
  auto third = Acquire(worker);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->resume().step(), 20);
  EXPECT_EQ(third->fallbacks_size(), 0);

  // Its trainer refuses step 20 too: nothing is left, so it starts from scratch, and so does
  // the next retry (no deleted file is ever offered).
  ASSERT_TRUE(report(3, 20, "DATA_LOSS: file missing").ok());
  EXPECT_NE(Attempts(a->run_id()).back().error().find("started from scratch"), std::string::npos);
  ok.set_attempt(3);
  ASSERT_TRUE(scheduler_->FinishRun(ok).ok());
  auto fourth = Acquire(worker);
  ASSERT_TRUE(fourth.has_value());
  EXPECT_FALSE(fourth->has_resume());
  EXPECT_EQ(fourth->fallbacks_size(), 0);
}

TEST_F(SchedulerTest, RetryResumesFromTheLatestCheckpointAndAcksMetrics) {
  const std::vector<int64_t> runs = Submit();
  const int64_t worker = RegisterWorker("w1");
  auto a = Acquire(worker);
  ASSERT_TRUE(a.has_value());
  xmod::v1::ReportMetricsRequest metrics;
  metrics.set_worker_id(worker);
  metrics.set_run_id(a->run_id());
  metrics.set_attempt(1);
  metrics.set_first_seq(0);
  for (int i = 0; i < 5; ++i) {
    xmod::v1::MetricPoint* p = metrics.add_points();
    p->set_name("train/loss");
    p->set_step(i + 1);
    p->set_flops((i + 1) * 1e9);
    p->set_value(5 - i * 0.1);
  }
  auto ack = ingest_->ReportMetrics(metrics);
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(ack->acked_seq(), 4);
  EXPECT_FALSE(ack->stale());
  ack = ingest_->ReportMetrics(metrics);  // replay
  EXPECT_EQ(ack->acked_seq(), 4);
  metrics.set_first_seq(10);  // a gap: stored, but the ack stays put
  ack = ingest_->ReportMetrics(metrics);
  EXPECT_EQ(ack->acked_seq(), 4);
  EXPECT_DOUBLE_EQ(Load(a->run_id()).progress().train_loss(), 5 - 4 * 0.1);

  for (int step : {2, 4}) {
    xmod::v1::ReportCheckpointRequest c;
    c.set_worker_id(worker);
    c.set_run_id(a->run_id());
    c.set_attempt(1);
    c.set_step(step);
    c.set_path(absl::StrCat(a->spec().checkpoint_dir(), "/step", step));
    c.set_sha256("abc");
    ASSERT_TRUE(scheduler_->ReportCheckpoint(c).ok());
  }
  xmod::v1::FinishRunRequest fail;
  fail.set_worker_id(worker);
  fail.set_run_id(a->run_id());
  fail.set_attempt(1);
  fail.set_outcome(xmod::v1::OUTCOME_FAILED);
  fail.set_exit_code(1);
  fail.set_error("CUDA out of memory");
  ASSERT_TRUE(scheduler_->FinishRun(fail).ok());
  EXPECT_EQ(Load(a->run_id()).state(), xmod::v1::QUEUED);
  EXPECT_NE(Load(a->run_id()).error().find("CUDA out of memory"), std::string::npos);
  // The failed attempt's late points are stale.
  metrics.set_first_seq(5);
  ack = ingest_->ReportMetrics(metrics);
  EXPECT_TRUE(ack->stale());
  // The other runs come first (backoff), then the retry resumes at step 4.
  clock_.Advance(scheduler_->BackoffMillis(1));
  std::optional<xmod::v1::Assignment> retry;
  for (int i = 0; i < 3 && (!retry || retry->run_id() != a->run_id()); ++i) retry = Acquire(worker);
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->run_id(), a->run_id());
  EXPECT_EQ(retry->attempt(), 2);
  EXPECT_EQ(retry->resume().step(), 4);
  EXPECT_EQ(retry->resume().path(), a->spec().checkpoint_dir() + "/step4");
  EXPECT_EQ(Attempts(a->run_id())[1].resumed_from_step(), 4);
  xmod::v1::FinishRunRequest ok = fail;
  ok.set_attempt(2);
  ok.set_outcome(xmod::v1::OUTCOME_SUCCEEDED);
  ASSERT_TRUE(scheduler_->FinishRun(ok).ok());
  EXPECT_EQ(Load(a->run_id()).state(), xmod::v1::SUCCEEDED);
  EXPECT_EQ(Load(a->run_id()).error(), "");
  // A finished run cannot be cancelled or resumed.
  EXPECT_EQ(scheduler_->CancelRun(a->run_id(), kTestActor).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(scheduler_->ResumeRun(a->run_id(), kTestActor).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(SchedulerTest, CancelledRunGetsAStopOrder) {
  const std::vector<int64_t> runs = Submit();
  const int64_t worker = RegisterWorker("w1");
  auto a = Acquire(worker);
  ASSERT_TRUE(scheduler_->CancelRun(a->run_id(), kTestActor).ok());
  EXPECT_EQ(Load(a->run_id()).state(), xmod::v1::CANCELLED);
  const xmod::v1::HeartbeatResponse beat = Beat(worker, *a);
  ASSERT_EQ(beat.orders_size(), 1);
  EXPECT_EQ(beat.orders(0).action(), xmod::v1::STOP);
  EXPECT_EQ(beat.orders(0).run_id(), a->run_id());
  // Resume is refused while the attempt is still stopping.
  EXPECT_EQ(scheduler_->ResumeRun(a->run_id(), kTestActor).code(),
            absl::StatusCode::kFailedPrecondition);
  xmod::v1::FinishRunRequest done;
  done.set_worker_id(worker);
  done.set_run_id(a->run_id());
  done.set_attempt(1);
  done.set_outcome(xmod::v1::OUTCOME_CANCELLED);
  ASSERT_TRUE(scheduler_->FinishRun(done).ok());
  EXPECT_EQ(Attempts(a->run_id())[0].outcome(), "cancelled");
  EXPECT_EQ(Load(a->run_id()).state(), xmod::v1::CANCELLED);
  ASSERT_TRUE(scheduler_->ResumeRun(a->run_id(), kTestActor).ok());
  EXPECT_EQ(Load(a->run_id()).state(), xmod::v1::QUEUED);
  // Cancelling the sweep cancels every queued run.
  ASSERT_TRUE(scheduler_->CancelSweep(Load(runs[0]).sweep_id(), kTestActor).ok());
  for (int64_t id : runs) EXPECT_EQ(Load(id).state(), xmod::v1::CANCELLED);
}

TEST_F(SchedulerTest, ReregisteredWorkerLosesAttemptsItNoLongerReports) {
  Submit();
  const int64_t worker = RegisterWorker("w1");
  auto kept = Acquire(worker);
  auto dropped = Acquire(worker);
  ASSERT_TRUE(kept && dropped);
  EXPECT_EQ(RegisterWorker("w1"), worker);  // same name, same id
  Beat(worker, *kept);
  EXPECT_EQ(Attempts(dropped->run_id())[0].outcome(), "lost");
  EXPECT_EQ(Load(dropped->run_id()).state(), xmod::v1::QUEUED);
  EXPECT_EQ(Load(kept->run_id()).state(), xmod::v1::RUNNING);
}

TEST_F(SchedulerTest, RestartRebuildsQueueLeasesAndWorkers) {
  const std::vector<int64_t> runs = Submit();
  const int64_t worker = RegisterWorker("w1");
  auto a = Acquire(worker);
  ASSERT_TRUE(a.has_value());
  xmod::v1::ReportMetricsRequest metrics;
  metrics.set_worker_id(worker);
  metrics.set_run_id(a->run_id());
  metrics.set_attempt(1);
  metrics.set_first_seq(0);
  metrics.add_points()->set_name("train/loss");
  ASSERT_EQ(ingest_->ReportMetrics(metrics)->acked_seq(), 0);

  Restart();
  // The worker is still known and its attempt continues: heartbeat renews, no orders.
  EXPECT_TRUE(Beat(worker, *a).orders().empty());
  EXPECT_FALSE(Beat(worker, *a).reregister());
  EXPECT_EQ(Load(a->run_id()).state(), xmod::v1::RUNNING);
  // The acked seq survived the restart.
  metrics.set_first_seq(1);
  EXPECT_EQ(ingest_->ReportMetrics(metrics)->acked_seq(), 1);
  // The queue survived: the two other runs come out in order.
  EXPECT_EQ(Acquire(worker)->run_id(), runs[1]);
  EXPECT_EQ(Acquire(worker)->run_id(), runs[2]);
  // And the lease still expires when heartbeats stop.
  clock_.Advance(10001);
  EXPECT_EQ(scheduler_->ExpireLeases(), 3);
  EXPECT_EQ(Load(a->run_id()).state(), xmod::v1::QUEUED);
}

TEST_F(SchedulerTest, MultiRankRunWaitsForAWorkerWithEnoughFreeSlots) {
  const std::vector<int64_t> wide = Submit(/*max_attempts=*/3, /*ranks=*/2);
  const std::vector<int64_t> narrow = Submit(/*max_attempts=*/3, /*ranks=*/0);
  // A one-slot worker can never host a 2-rank run: it skips them and takes a 1-slot run.
  const int64_t small = RegisterWorker("small", /*slots=*/1);
  std::optional<xmod::v1::Assignment> a = Acquire(small, {0});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->run_id(), narrow[0]);
  EXPECT_EQ(a->slots_size(), 1);
  // A two-slot worker with one slot busy is reserved for the 2-rank run at the head of the
  // queue: the 1-slot runs behind it are not leased there (no starvation by backfill).
  const int64_t big = RegisterWorker("big", /*slots=*/2);
  EXPECT_FALSE(Acquire(big, {1}).has_value());
  EXPECT_EQ(Load(narrow[1]).state(), xmod::v1::QUEUED);
  // Once both slots are free it gets the 2-rank run on both.
  a = Acquire(big, {0, 1});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->run_id(), wide[0]);
  EXPECT_EQ(a->spec().training().ranks(), 2);
  EXPECT_EQ(a->slots_size(), 2);
  EXPECT_EQ(a->slots(0), 0);
  EXPECT_EQ(a->slots(1), 1);
  EXPECT_EQ(Load(wide[0]).state(), xmod::v1::RUNNING);
  EXPECT_EQ(Load(wide[0]).worker(), "big");
}

// A FinishRun of `a` with `outcome`, `exit_code` and `last_seq`.
xmod::v1::FinishRunRequest Finish(int64_t worker, const xmod::v1::Assignment& a,
                                  xmod::v1::Outcome outcome, int exit_code = 0,
                                  int64_t last_seq = 0) {
  xmod::v1::FinishRunRequest request;
  request.set_worker_id(worker);
  request.set_run_id(a.run_id());
  request.set_attempt(a.attempt());
  request.set_outcome(outcome);
  request.set_exit_code(exit_code);
  request.set_last_seq(last_seq);
  request.set_error("xmod-train: failed");
  return request;
}

TEST_F(SchedulerTest, FailuresThatWouldRecurAreNotRetried) {
  const std::vector<int64_t> runs = Submit(/*max_attempts=*/5);
  const int64_t worker = RegisterWorker("w1");
  std::optional<xmod::v1::Assignment> config = Acquire(worker);
  std::optional<xmod::v1::Assignment> nan = Acquire(worker);
  std::optional<xmod::v1::Assignment> crash = Acquire(worker);
  ASSERT_TRUE(config && nan && crash);
  ASSERT_TRUE(
      scheduler_->FinishRun(Finish(worker, *config, xmod::v1::OUTCOME_FAILED, kExitInvalidConfig))
          .ok());
  ASSERT_TRUE(
      scheduler_->FinishRun(Finish(worker, *nan, xmod::v1::OUTCOME_FAILED, kExitDiverged)).ok());
  ASSERT_TRUE(
      scheduler_->FinishRun(Finish(worker, *crash, xmod::v1::OUTCOME_FAILED, kExitFailure)).ok());
  const xmod::v1::Run failed_config = Load(config->run_id());
  EXPECT_EQ(failed_config.state(), xmod::v1::FAILED);
  EXPECT_NE(failed_config.error().find("invalid configuration, exit 3"), std::string::npos)
      << failed_config.error();
  EXPECT_NE(failed_config.error().find("not retried"), std::string::npos);
  const xmod::v1::Run failed_nan = Load(nan->run_id());
  EXPECT_EQ(failed_nan.state(), xmod::v1::FAILED);
  EXPECT_NE(failed_nan.error().find("loss diverged"), std::string::npos) << failed_nan.error();
  EXPECT_EQ(Attempts(nan->run_id()).size(), 1u);
  EXPECT_EQ(Attempts(nan->run_id())[0].exit_code(), kExitDiverged);
  // Any other failure is retried.
  EXPECT_EQ(Load(crash->run_id()).state(), xmod::v1::QUEUED);
}

TEST_F(SchedulerTest, OutOfMemoryWalksTheMemoryPlansThenFailsTheRun) {
  // 128 tokens a step in windows of 64: activation checkpointing, then micro-batches of 64,
  // then nothing smaller. max_attempts 2: smaller plans are not counted against it.
  const std::vector<int64_t> runs = Submit(/*max_attempts=*/2);
  const int64_t worker = RegisterWorker("w1");
  ASSERT_TRUE(scheduler_->CancelRun(runs[1], kTestActor).ok());
  ASSERT_TRUE(scheduler_->CancelRun(runs[2], kTestActor).ok());
  std::optional<xmod::v1::Assignment> a = Acquire(worker);
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->spec().training().activation_checkpointing());
  EXPECT_EQ(a->spec().training().micro_batch_tokens(), 0);
  ASSERT_TRUE(
      scheduler_->FinishRun(Finish(worker, *a, xmod::v1::OUTCOME_FAILED, kExitOutOfMemory)).ok());
  EXPECT_EQ(Load(runs[0]).state(), xmod::v1::QUEUED);

  // Requeued at once, with activation checkpointing; the restarted coordinator agrees.
  Restart();
  const int64_t again = RegisterWorker("w1");
  a = Acquire(again);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->attempt(), 2);
  EXPECT_TRUE(a->spec().training().activation_checkpointing());
  EXPECT_EQ(a->spec().training().micro_batch_tokens(), 0);
  EXPECT_EQ(a->spec().training().batch_tokens(), 128);
  ASSERT_TRUE(
      scheduler_->FinishRun(Finish(again, *a, xmod::v1::OUTCOME_FAILED, kExitOutOfMemory)).ok());

  a = Acquire(again);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->attempt(), 3);
  EXPECT_TRUE(a->spec().training().activation_checkpointing());
  EXPECT_EQ(a->spec().training().micro_batch_tokens(), 64);
  ASSERT_TRUE(
      scheduler_->FinishRun(Finish(again, *a, xmod::v1::OUTCOME_FAILED, kExitOutOfMemory)).ok());

  // Each attempt says what it ran with; the stored spec is as submitted.
  const std::vector<xmod::v1::Attempt> attempts = Attempts(runs[0]);
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0].memory_plan(), "");
  EXPECT_EQ(attempts[1].memory_plan(), "activation checkpointing (after 1 out-of-memory failure)");
  EXPECT_EQ(attempts[2].memory_plan(),
            "activation checkpointing, micro-batches of 64 tokens (after 2 out-of-memory "
            "failures)");
  const xmod::v1::Run run = Load(runs[0]);
  EXPECT_EQ(run.state(), xmod::v1::FAILED);
  EXPECT_FALSE(run.spec().training().activation_checkpointing());
  EXPECT_NE(run.error().find("out of memory 3 times, the last with the smallest memory plan"),
            std::string::npos)
      << run.error();
}

TEST_F(SchedulerTest, SuccessNeedsEveryProducedPointDurable) {
  const std::vector<int64_t> runs = Submit();
  const int64_t worker = RegisterWorker("w1");
  std::optional<xmod::v1::Assignment> a = Acquire(worker);
  ASSERT_TRUE(a.has_value());
  xmod::v1::ReportMetricsRequest metrics;
  metrics.set_worker_id(worker);
  metrics.set_run_id(a->run_id());
  metrics.set_attempt(1);
  metrics.set_first_seq(1);
  for (int i = 1; i <= 3; ++i) {
    xmod::v1::MetricPoint* p = metrics.add_points();
    p->set_name("train/loss");
    p->set_step(i);
    p->set_value(1.0 / i);
  }
  ASSERT_EQ(ingest_->ReportMetrics(metrics)->acked_seq(), 3);
  // The trainer produced 5 points; only 3 are durable: not a success.
  ASSERT_TRUE(
      scheduler_->FinishRun(Finish(worker, *a, xmod::v1::OUTCOME_SUCCEEDED, 0, /*last_seq=*/5))
          .ok());
  xmod::v1::Run run = Load(a->run_id());
  EXPECT_EQ(run.state(), xmod::v1::QUEUED);
  EXPECT_NE(run.error().find("metrics incomplete: durable up to seq 3 of 5"), std::string::npos)
      << run.error();
  EXPECT_EQ(Attempts(a->run_id())[0].outcome(), "failed");
  // The retry delivers every point it produced: SUCCEEDED.
  clock_.Advance(scheduler_->BackoffMillis(1));
  std::optional<xmod::v1::Assignment> retry;
  for (int i = 0; i < 3 && (!retry || retry->run_id() != a->run_id()); ++i) retry = Acquire(worker);
  ASSERT_TRUE(retry.has_value());
  ASSERT_EQ(retry->run_id(), a->run_id());
  metrics.set_attempt(retry->attempt());
  ASSERT_EQ(ingest_->ReportMetrics(metrics)->acked_seq(), 3);
  ASSERT_TRUE(
      scheduler_->FinishRun(Finish(worker, *retry, xmod::v1::OUTCOME_SUCCEEDED, 0, /*last_seq=*/3))
          .ok());
  EXPECT_EQ(Load(a->run_id()).state(), xmod::v1::SUCCEEDED);
}

TEST_F(SchedulerTest, LeasesFollowTheMonotonicClockNotTheWallClock) {
  Submit();
  const int64_t worker = RegisterWorker("w1");
  std::optional<xmod::v1::Assignment> a = Acquire(worker);
  ASSERT_TRUE(a.has_value());
  clock_.StepWall(3'600'000);  // NTP moves the wall clock an hour ahead
  EXPECT_EQ(scheduler_->ExpireLeases(), 0);
  EXPECT_EQ(Load(a->run_id()).state(), xmod::v1::RUNNING);
  clock_.StepWall(-7'200'000);  // and two hours back
  clock_.Advance(10001);        // the TTL passes on the monotonic clock
  EXPECT_EQ(scheduler_->ExpireLeases(), 1);
  EXPECT_EQ(Load(a->run_id()).state(), xmod::v1::QUEUED);
}

TEST_F(SchedulerTest, AFailedCommitLeavesMemoryAsTheDatabaseHasIt) {
  const std::vector<int64_t> runs = Submit();
  const int64_t worker = RegisterWorker("w1");
  std::optional<xmod::v1::Assignment> running = Acquire(worker);
  ASSERT_TRUE(running.has_value());
  store_->TEST_FailCommits(absl::ResourceExhaustedError("database or disk is full"));

  // Acquire: refused, and the run stays queued in memory as in the database.
  xmod::v1::AcquireRunRequest request;
  request.set_worker_id(worker);
  request.add_free_slots(1);
  EXPECT_EQ(scheduler_->Acquire(request).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Load(runs[1]).state(), xmod::v1::QUEUED);
  EXPECT_FALSE(scheduler_->LeaseExpiry(runs[1], 1).has_value());
  // Lease expiry: nothing expires until it can be stored.
  clock_.Advance(10001);
  EXPECT_EQ(scheduler_->ExpireLeases(), 0);
  EXPECT_TRUE(scheduler_->LeaseExpiry(running->run_id(), 1).has_value());
  EXPECT_EQ(Load(running->run_id()).state(), xmod::v1::RUNNING);
  EXPECT_NE(Attempts(running->run_id())[0].outcome(), "lost");
  // FinishRun and cancellation: refused, nothing changes.
  EXPECT_EQ(scheduler_->FinishRun(Finish(worker, *running, xmod::v1::OUTCOME_SUCCEEDED)).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(scheduler_->CancelRun(runs[2], kTestActor).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Load(runs[2]).state(), xmod::v1::QUEUED);

  // Space returns: the same calls go through, against the state they would have found.
  store_->TEST_FailCommits(absl::OkStatus());
  EXPECT_EQ(scheduler_->ExpireLeases(), 1);
  EXPECT_EQ(Attempts(running->run_id())[0].outcome(), "lost");
  // The run the refused Acquire had picked is leased now, as its first attempt.
  std::optional<xmod::v1::Assignment> next;
  for (int i = 0; i < 3 && (!next || next->run_id() != runs[1]); ++i) next = Acquire(worker);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->run_id(), runs[1]);
  EXPECT_EQ(next->attempt(), 1);
  ASSERT_TRUE(scheduler_->CancelRun(runs[2], kTestActor).ok());
  EXPECT_EQ(Load(runs[2]).state(), xmod::v1::CANCELLED);
}

TEST_F(SchedulerTest, HeartbeatsKeepLeasesAliveWhileTheDatabaseCannotBeWritten) {
  Submit();
  const int64_t worker = RegisterWorker("w1");
  std::optional<xmod::v1::Assignment> running = Acquire(worker);
  ASSERT_TRUE(running.has_value());
  store_->TEST_FailCommits(absl::ResourceExhaustedError("database or disk is full"));
  // Three lease TTLs of heartbeats while nothing can be stored: each answered, the lease
  // renewed in memory, the run running.
  for (int i = 0; i < 6; ++i) {
    clock_.Advance(5000);
    EXPECT_EQ(Beat(worker, *running).orders_size(), 0);
    EXPECT_EQ(scheduler_->ExpireLeases(), 0);
  }
  // New work is refused naming the cause.
  xmod::v1::SweepSpec spec = TinySweep(dir_);
  absl::StatusOr<std::vector<xmod::v1::Run>> expanded = ExpandSweep(spec);
  ASSERT_TRUE(expanded.ok());
  absl::StatusOr<int64_t> refused = scheduler_->SubmitSweep(spec, &*expanded);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::AllOf(::testing::HasSubstr("cannot be written (database or disk is full)"),
                               ::testing::HasSubstr("new work is refused until space returns")));

  // Space returns: the run never stopped, and finishes as it would have.
  store_->TEST_FailCommits(absl::OkStatus());
  EXPECT_EQ(scheduler_->ExpireLeases(), 0);
  EXPECT_EQ(Load(running->run_id()).state(), xmod::v1::RUNNING);
  ASSERT_TRUE(scheduler_->FinishRun(Finish(worker, *running, xmod::v1::OUTCOME_SUCCEEDED)).ok());
  EXPECT_EQ(Load(running->run_id()).state(), xmod::v1::SUCCEEDED);
  EXPECT_EQ(Attempts(running->run_id()).size(), 1u);
}

TEST_F(SchedulerTest, AFullDiskIsResourceExhaustedAndWritesResumeWhenSpaceReturns) {
  // A real SQLITE_FULL: the database may not grow past its current size.
  int64_t pages = 0;
  ASSERT_TRUE(store_
                  ->Read([&](Db& db) {
                    absl::StatusOr<Stmt> stmt = db.Prepare("PRAGMA page_count");
                    if (!stmt.ok()) return stmt.status();
                    absl::StatusOr<bool> row = stmt->Step();
                    if (!row.ok()) return row.status();
                    pages = stmt->Int(0);
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_GT(pages, 0);
  auto set_max_pages = [&](int64_t n) {
    return store_->WriteAndWait(
        [n](Db& db) { return db.Exec(absl::StrCat("PRAGMA max_page_count = ", n)); });
  };
  ASSERT_TRUE(set_max_pages(pages).ok()) << set_max_pages(pages);
  xmod::v1::SweepSpec spec = TinySweep(dir_);
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
  ASSERT_TRUE(runs.ok());
  spec.set_description(std::string(1 << 20, 'x'));  // stored as is: needs new pages
  absl::StatusOr<int64_t> refused = scheduler_->SubmitSweep(spec, &*runs);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  const int64_t worker = RegisterWorker("w1");
  EXPECT_FALSE(Acquire(worker).has_value());  // nothing was queued in memory either

  ASSERT_TRUE(set_max_pages(1 << 30).ok());
  absl::StatusOr<int64_t> accepted = scheduler_->SubmitSweep(spec, &*runs);
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  std::optional<xmod::v1::Assignment> a = Acquire(worker);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(Load(a->run_id()).state(), xmod::v1::RUNNING);
}

TEST_F(SchedulerTest, ADrainingWorkersFreeSlotsAreNoRoomForAQueuedRun) {
  options_.sharing.min_run_ms = 0;
  Restart();
  xmod::v1::SweepSpec spec = TinySweep(dir_);
  absl::StatusOr<std::vector<xmod::v1::Run>> low = ExpandSweep(spec);
  ASSERT_TRUE(low.ok()) << low.status();
  ASSERT_TRUE(scheduler_->SubmitSweep(spec, &*low).ok());
  const int64_t w1 = RegisterWorker("w1", 1);
  std::optional<xmod::v1::Assignment> held = Acquire(w1, {0});
  ASSERT_TRUE(held.has_value());
  const int64_t w2 = RegisterWorker("w2", 3);
  spec.set_priority(5);
  absl::StatusOr<std::vector<xmod::v1::Run>> high = ExpandSweep(spec);
  ASSERT_TRUE(high.ok()) << high.status();
  ASSERT_TRUE(scheduler_->SubmitSweep(spec, &*high).ok());
  // w2's free slots are room: the three priority-5 runs wait for w2 to ask for them.
  EXPECT_EQ(scheduler_->Preempt(), 0);
  // w2 drains: it will take no run, so a priority-5 run makes room on w1 at once rather
  // than wait for w2's lease TTL to pass.
  xmod::v1::HeartbeatRequest leaving;
  leaving.set_worker_id(w2);
  leaving.set_leaving(true);
  ASSERT_TRUE(scheduler_->Heartbeat(leaving).ok());
  EXPECT_EQ(scheduler_->Preempt(), 1);
  xmod::v1::HeartbeatResponse orders = Beat(w1, *held);
  ASSERT_EQ(orders.orders_size(), 1);
  EXPECT_EQ(orders.orders(0).run_id(), held->run_id());
  EXPECT_EQ(orders.orders(0).action(), xmod::v1::PREEMPT);
}

TEST_F(SchedulerTest, UnknownWorkerIsToldToRegister) {
  xmod::v1::HeartbeatRequest request;
  request.set_worker_id(42);
  absl::StatusOr<xmod::v1::HeartbeatResponse> r = scheduler_->Heartbeat(request);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->reregister());
}

}  // namespace
}  // namespace xmod
