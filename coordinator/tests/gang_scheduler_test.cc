// Gang scheduling tests with a FakeClock (scheduler.h, "Gangs"): a run spanning several
// workers starts on all of them or none, the head gang's reservation keeps small runs from
// starving it while other workers backfill, two large gangs never deadlock, a member that
// does not take its part releases the gang, the loss of any member ends the attempt for all
// and the run resumes on a fresh gang, reports are fenced per attempt, open gangs survive
// a restart, and no two open gangs share a rendezvous address (an exhausted port range
// makes a gang wait; a restart keeps the ports of running gangs), and a gang's members are
// stored as rows of attempt_members.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/tests/test_util.h"
#include "gtest/gtest.h"
#include "trainer_contract/exit_codes.h"

namespace xmod {
namespace {

class GangSchedulerTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("gang");
    Open();
  }

  void Open() {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir_ + "/x.db", StoreOptions{});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    options_.lease_ttl_ms = 10000;
    options_.heartbeat_interval_ms = 2000;
    options_.gang_start_timeout_ms = 5000;
    options_.backoff_base_ms = 1000;
    options_.checkpoint_root = dir_ + "/ckpt";
    ingest_ = std::make_unique<MetricIngest>(store_.get(), &feed_, nullptr, 8);
    absl::StatusOr<std::unique_ptr<Scheduler>> s =
        Scheduler::Create(store_.get(), &clock_, &feed_, nullptr, ingest_.get(), options_);
    ASSERT_TRUE(s.ok()) << s.status();
    scheduler_ = *std::move(s);
  }

  // Submits `count` one-run sweeps with `ranks` ranks, `per_worker` of them on each worker
  // (0 = all on one); returns their run ids in queue order.
  std::vector<int64_t> Submit(int ranks, int per_worker, int count = 1) {
    std::vector<int64_t> ids;
    for (int i = 0; i < count; ++i) {
      xmod::v1::SweepSpec spec = TinySweep(dir_);
      spec.set_name(absl::StrCat("s", ++sweeps_));
      spec.mutable_training()->set_batch_tokens(64 * 4);
      spec.mutable_training()->set_ranks(ranks);
      spec.mutable_training()->set_ranks_per_worker(per_worker);
      spec.mutable_grids(0)->clear_ks();
      spec.mutable_grids(0)->add_ks(1);
      spec.mutable_grids(0)->clear_archs();
      spec.mutable_grids(0)->add_archs(xmod::v1::DENSE);
      absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
      EXPECT_TRUE(runs.ok()) << runs.status();
      EXPECT_EQ(runs->size(), 1u);
      EXPECT_TRUE(scheduler_->SubmitSweep(spec, &*runs).ok());
      ids.push_back(runs->front().id());
    }
    return ids;
  }

  // Registers worker `name` at host-<name> with `ports` rendezvous ports from 29500 on (0 =
  // none).
  int64_t RegisterWorker(const std::string& name, int slots = 1, int ports = 2) {
    xmod::v1::RegisterRequest request = CpuWorker(name, slots);
    request.set_advertise_host(absl::StrCat("host-", name));
    if (ports > 0) {
      request.set_rendezvous_port_first(29500);
      request.set_rendezvous_port_last(29500 + ports - 1);
    }
    absl::StatusOr<xmod::v1::RegisterResponse> r = scheduler_->Register(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return r->worker_id();
  }

  std::optional<xmod::v1::Assignment> Acquire(int64_t worker,
                                              const std::vector<int32_t>& free_slots = {0}) {
    return AcquireNow(*scheduler_, worker, free_slots);
  }

  xmod::v1::HeartbeatResponse Beat(int64_t worker, const xmod::v1::Assignment& a, int step = 3) {
    xmod::v1::HeartbeatRequest request;
    request.set_worker_id(worker);
    xmod::v1::RunningAttempt* running = request.add_running();
    running->set_run_id(a.run_id());
    running->set_attempt(a.attempt());
    running->mutable_progress()->set_step(step);
    absl::StatusOr<xmod::v1::HeartbeatResponse> r = scheduler_->Heartbeat(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }

  absl::Status Finish(int64_t worker, const xmod::v1::Assignment& a, xmod::v1::Outcome outcome,
                      int exit_code = 0) {
    xmod::v1::FinishRunRequest request;
    request.set_worker_id(worker);
    request.set_run_id(a.run_id());
    request.set_attempt(a.attempt());
    request.set_outcome(outcome);
    request.set_exit_code(exit_code);
    return scheduler_->FinishRun(request);
  }

  xmod::v1::Run Load(int64_t run_id) { return StoredRun(*store_, run_id); }

  std::vector<xmod::v1::Attempt> Attempts(int64_t run_id) {
    return StoredAttempts(*store_, run_id);
  }

  // Column `column` of attempt 1 of `run_id` ("" when NULL or there is none).
  std::string FirstAttemptColumn(int64_t run_id, const std::string& column) {
    std::string value;
    EXPECT_TRUE(store_
                    ->Read([&](Db& db) {
                      absl::StatusOr<Stmt> stmt = db.Prepare(absl::StrCat(
                          "SELECT ", column, " FROM attempts WHERE run_id = ? AND attempt = 1"));
                      if (!stmt.ok()) return stmt.status();
                      stmt->Bind(1, run_id);
                      absl::StatusOr<bool> row = stmt->Step();
                      if (!row.ok()) return row.status();
                      if (*row) value = stmt->Text(0);
                      return absl::OkStatus();
                    })
                    .ok());
    return value;
  }
  // The slots column of attempt 1 of `run_id`: each member's slots, ';'-separated.
  std::string SlotsOfFirstAttempt(int64_t run_id) { return FirstAttemptColumn(run_id, "slots"); }

  static bool Killed(const xmod::v1::HeartbeatResponse& reply) {
    return std::any_of(reply.orders().begin(), reply.orders().end(),
                       [](const xmod::v1::Order& o) { return o.action() == xmod::v1::KILL; });
  }

  std::string dir_;
  int sweeps_ = 0;
  FakeClock clock_;
  ChangeFeed feed_;
  SchedulerOptions options_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<MetricIngest> ingest_;  // outlives the scheduler
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(GangSchedulerTest, RanksPerWorkerMustDivideTheRanks) {
  xmod::v1::SweepSpec spec = TinySweep(dir_);
  spec.mutable_training()->set_batch_tokens(64 * 4);
  spec.mutable_training()->set_ranks(4);
  spec.mutable_training()->set_ranks_per_worker(3);
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
  ASSERT_FALSE(runs.ok());
  EXPECT_NE(runs.status().message().find("training.ranks_per_worker"), std::string::npos)
      << runs.status();
  spec.mutable_training()->set_ranks_per_worker(-1);
  EXPECT_FALSE(ExpandSweep(spec).ok());
}

TEST_F(GangSchedulerTest, GangStartsOnEveryMemberAtOnceOrNotAtAll) {
  const int64_t run = Submit(/*ranks=*/2, /*per_worker=*/1)[0];
  const int64_t a = RegisterWorker("a");
  const int64_t b = RegisterWorker("b");
  // b has never polled, so its slots are not known to be free: nothing starts.
  EXPECT_FALSE(Acquire(a).has_value());
  EXPECT_EQ(Load(run).state(), xmod::v1::QUEUED);
  EXPECT_TRUE(Attempts(run).empty());
  // b polls while a's poll is recent: the gang is placed on both, b (the poller) as member 0.
  std::optional<xmod::v1::Assignment> part_b = Acquire(b);
  ASSERT_TRUE(part_b.has_value());
  EXPECT_EQ(Load(run).state(), xmod::v1::RUNNING);
  ASSERT_EQ(Attempts(run).size(), 1u);
  EXPECT_EQ(Attempts(run)[0].worker(), "b,a");
  EXPECT_EQ(SlotsOfFirstAttempt(run), "0;0");
  ASSERT_TRUE(part_b->has_gang());
  EXPECT_EQ(part_b->gang().member(), 0);
  EXPECT_EQ(part_b->gang().members(), 2);
  EXPECT_EQ(part_b->gang().rank_offset(), 0);
  EXPECT_EQ(part_b->gang().world_size(), 2);
  EXPECT_EQ(part_b->gang().rendezvous(), "tcp://host-b:29500");
  EXPECT_EQ(part_b->gang().host(), "host-b");
  // a takes the other part of the same attempt when it polls next.
  std::optional<xmod::v1::Assignment> part_a = Acquire(a);
  ASSERT_TRUE(part_a.has_value());
  EXPECT_EQ(part_a->run_id(), run);
  EXPECT_EQ(part_a->attempt(), part_b->attempt());
  EXPECT_EQ(part_a->gang().member(), 1);
  EXPECT_EQ(part_a->gang().rank_offset(), 1);
  EXPECT_EQ(part_a->gang().rendezvous(), part_b->gang().rendezvous());
  EXPECT_EQ(part_a->gang().host(), "host-a");
  EXPECT_EQ(part_a->slots_size(), 1);
  EXPECT_GT(part_a->lease_ttl_ms(), 0);
  // Each member renews its own lease; only member 0's progress moves the run.
  EXPECT_TRUE(Beat(a, *part_a, /*step=*/0).orders().empty());
  EXPECT_TRUE(Beat(b, *part_b, /*step=*/7).orders().empty());
  EXPECT_EQ(Load(run).progress().step(), 7);
  EXPECT_TRUE(Beat(a, *part_a, /*step=*/0).orders().empty());
  EXPECT_EQ(Load(run).progress().step(), 7);
  // A worker outside the gang holds nothing of it.
  const int64_t c = RegisterWorker("c");
  EXPECT_TRUE(Killed(Beat(c, *part_a)));
  // A member other than 0 succeeding ends nothing; member 0 succeeding ends the attempt.
  ASSERT_TRUE(Finish(a, *part_a, xmod::v1::OUTCOME_SUCCEEDED).ok());
  EXPECT_EQ(Load(run).state(), xmod::v1::RUNNING);
  ASSERT_TRUE(Finish(b, *part_b, xmod::v1::OUTCOME_SUCCEEDED).ok());
  EXPECT_EQ(Load(run).state(), xmod::v1::SUCCEEDED);
}

TEST_F(GangSchedulerTest, HeadGangReservesWorkersAndOthersBackfill) {
  const int64_t early = Submit(/*ranks=*/0, /*per_worker=*/0)[0];
  const int64_t gang = Submit(/*ranks=*/4, /*per_worker=*/2)[0];
  const std::vector<int64_t> late = Submit(/*ranks=*/0, /*per_worker=*/0, /*count=*/2);
  const int64_t w1 = RegisterWorker("w1", /*slots=*/2);
  const int64_t w2 = RegisterWorker("w2", /*slots=*/2);
  const int64_t small = RegisterWorker("small", /*slots=*/1);  // too small for a member
  std::optional<xmod::v1::Assignment> e = Acquire(w1, {0, 1});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->run_id(), early);
  // The gang at the head needs two free slots on each of two workers; w1 has one. It
  // reserves w1 and w2: neither gets a small run from behind it, so w1 drains...
  EXPECT_FALSE(Acquire(w2, {0, 1}).has_value());
  EXPECT_FALSE(Acquire(w1, {1}).has_value());
  EXPECT_EQ(Load(late[0]).state(), xmod::v1::QUEUED);
  // ...while a worker outside the reservation backfills one.
  std::optional<xmod::v1::Assignment> backfill = Acquire(small, {0});
  ASSERT_TRUE(backfill.has_value());
  EXPECT_EQ(backfill->run_id(), late[0]);
  // Once w1 drained, the gang starts on both; the small run behind it still waits.
  ASSERT_TRUE(Finish(w1, *e, xmod::v1::OUTCOME_SUCCEEDED).ok());
  std::optional<xmod::v1::Assignment> part = Acquire(w1, {0, 1});
  ASSERT_TRUE(part.has_value());
  EXPECT_EQ(part->run_id(), gang);
  EXPECT_EQ(Attempts(gang)[0].worker(), "w1,w2");
  EXPECT_EQ(SlotsOfFirstAttempt(gang), "0,1;0,1");
  EXPECT_EQ(Acquire(w2, {0, 1})->gang().member(), 1);
  EXPECT_EQ(Load(late[1]).state(), xmod::v1::QUEUED);
}

TEST_F(GangSchedulerTest, TwoLargeGangsRunOneAfterTheOtherWithoutDeadlock) {
  const std::vector<int64_t> gangs = Submit(/*ranks=*/4, /*per_worker=*/2, /*count=*/2);
  const int64_t a = RegisterWorker("a", /*slots=*/2);
  const int64_t b = RegisterWorker("b", /*slots=*/2);
  // Neither gang holds part of a worker while it waits: the first reserves both workers, the
  // second cannot reserve anything, and nothing starts until the first fits whole.
  EXPECT_FALSE(Acquire(a, {0, 1}).has_value());
  std::optional<xmod::v1::Assignment> first_b = Acquire(b, {0, 1});
  ASSERT_TRUE(first_b.has_value());
  EXPECT_EQ(first_b->run_id(), gangs[0]);
  EXPECT_EQ(first_b->slots_size(), 2);
  std::optional<xmod::v1::Assignment> first_a = Acquire(a, {0, 1});
  ASSERT_TRUE(first_a.has_value());
  EXPECT_EQ(first_a->run_id(), gangs[0]);
  EXPECT_EQ(first_a->gang().rank_offset(), 2);
  EXPECT_EQ(first_a->gang().world_size(), 4);
  EXPECT_EQ(Load(gangs[1]).state(), xmod::v1::QUEUED);
  ASSERT_TRUE(Finish(a, *first_a, xmod::v1::OUTCOME_SUCCEEDED).ok());
  ASSERT_TRUE(Finish(b, *first_b, xmod::v1::OUTCOME_SUCCEEDED).ok());
  // Then the second gang takes both workers once both polled again, its store on the next
  // port of b's range.
  EXPECT_FALSE(Acquire(a, {0, 1}).has_value());
  std::optional<xmod::v1::Assignment> second = Acquire(b, {0, 1});
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->run_id(), gangs[1]);
  EXPECT_EQ(first_b->gang().rendezvous(), "tcp://host-b:29500");
  EXPECT_EQ(second->gang().rendezvous(), "tcp://host-b:29501");
  ASSERT_TRUE(Acquire(a, {0, 1}).has_value());
  EXPECT_EQ(Load(gangs[1]).state(), xmod::v1::RUNNING);
}

TEST_F(GangSchedulerTest, ExhaustedPortRangeMakesTheGangWaitUntilAPortIsFreed) {
  const std::vector<int64_t> gangs = Submit(/*ranks=*/2, /*per_worker=*/1, /*count=*/2);
  const int64_t a = RegisterWorker("a", /*slots=*/2, /*ports=*/0);
  const int64_t b = RegisterWorker("b", /*slots=*/2, /*ports=*/1);
  EXPECT_FALSE(Acquire(a, {0, 1}).has_value());
  std::optional<xmod::v1::Assignment> first_b = Acquire(b, {0, 1});
  ASSERT_TRUE(first_b.has_value());
  EXPECT_EQ(first_b->run_id(), gangs[0]);
  EXPECT_EQ(first_b->gang().rendezvous(), "tcp://host-b:29500");
  std::optional<xmod::v1::Assignment> first_a = Acquire(a, {0, 1});
  ASSERT_TRUE(first_a.has_value());
  // Both workers have a free slot, but b's only port serves the first gang and a declares
  // none: the second gang is not placed, and says why.
  EXPECT_FALSE(Acquire(a, {1}).has_value());
  EXPECT_FALSE(Acquire(b, {1}).has_value());
  EXPECT_EQ(Load(gangs[1]).state(), xmod::v1::QUEUED);
  EXPECT_TRUE(Attempts(gangs[1]).empty());
  EXPECT_EQ(scheduler_->PendingReason(gangs[1]),
            "waiting for a rendezvous port: every port of b (host-b:29500-29500) is held by an "
            "open gang");
  // The first gang ends: its port is free again and the second gang takes it.
  ASSERT_TRUE(Finish(a, *first_a, xmod::v1::OUTCOME_SUCCEEDED).ok());
  ASSERT_TRUE(Finish(b, *first_b, xmod::v1::OUTCOME_SUCCEEDED).ok());
  std::optional<xmod::v1::Assignment> second = Acquire(a, {0, 1});
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->run_id(), gangs[1]);
  EXPECT_EQ(second->gang().member(), 1);
  EXPECT_EQ(second->gang().rendezvous(), "tcp://host-b:29500");
  EXPECT_EQ(FirstAttemptColumn(gangs[1], "rendezvous"), "tcp://host-b:29500");
  EXPECT_EQ(scheduler_->PendingReason(gangs[1]), "");
}

TEST_F(GangSchedulerTest, ARestartKeepsTheRendezvousPortsOfRunningGangs) {
  const std::vector<int64_t> gangs = Submit(/*ranks=*/2, /*per_worker=*/1, /*count=*/3);
  const int64_t a = RegisterWorker("a", /*slots=*/3, /*ports=*/0);
  const int64_t b = RegisterWorker("b", /*slots=*/3, /*ports=*/2);
  EXPECT_FALSE(Acquire(a, {0, 1, 2}).has_value());
  std::optional<xmod::v1::Assignment> first_b = Acquire(b, {0, 1, 2});
  ASSERT_TRUE(first_b.has_value());
  std::optional<xmod::v1::Assignment> first_a = Acquire(a, {0, 1, 2});
  ASSERT_TRUE(first_a.has_value());
  EXPECT_EQ(FirstAttemptColumn(gangs[0], "rendezvous"), "tcp://host-b:29500");
  scheduler_.reset();
  ingest_.reset();
  store_.reset();
  Open();
  // The running gang keeps 29500 after the restart: the next gang gets 29501...
  EXPECT_TRUE(Beat(a, *first_a).orders().empty());
  EXPECT_TRUE(Beat(b, *first_b).orders().empty());
  EXPECT_FALSE(Acquire(a, {1, 2}).has_value());
  std::optional<xmod::v1::Assignment> second = Acquire(b, {1, 2});
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->run_id(), gangs[1]);
  EXPECT_EQ(second->gang().rendezvous(), "tcp://host-b:29501");
  ASSERT_TRUE(Acquire(a, {1, 2}).has_value());
  // ...and the third waits for one of them.
  EXPECT_FALSE(Acquire(a, {2}).has_value());
  EXPECT_FALSE(Acquire(b, {2}).has_value());
  EXPECT_EQ(Load(gangs[2]).state(), xmod::v1::QUEUED);
  EXPECT_NE(scheduler_->PendingReason(gangs[2]).find("waiting for a rendezvous port"),
            std::string::npos);
}

TEST_F(GangSchedulerTest, AGangRecordedWithoutItsAddressHoldsItsHostsWholeRange) {
  const std::vector<int64_t> gangs = Submit(/*ranks=*/2, /*per_worker=*/1, /*count=*/2);
  const int64_t a = RegisterWorker("a", /*slots=*/2, /*ports=*/0);
  const int64_t b = RegisterWorker("b", /*slots=*/2, /*ports=*/2);
  EXPECT_FALSE(Acquire(a, {0, 1}).has_value());
  std::optional<xmod::v1::Assignment> first_b = Acquire(b, {0, 1});
  ASSERT_TRUE(first_b.has_value());
  std::optional<xmod::v1::Assignment> first_a = Acquire(a, {0, 1});
  ASSERT_TRUE(first_a.has_value());
  // As a database from before schema version 5 holds it: no address for the open gang.
  ASSERT_TRUE(
      store_->WriteAndWait([](Db& db) { return db.Exec("UPDATE attempts SET rendezvous = NULL"); })
          .ok());
  scheduler_.reset();
  ingest_.reset();
  store_.reset();
  Open();
  EXPECT_TRUE(Beat(a, *first_a).orders().empty());
  EXPECT_TRUE(Beat(b, *first_b).orders().empty());
  // Either port of b may be the running gang's store: the next gang waits for it to end.
  EXPECT_FALSE(Acquire(a, {1}).has_value());
  EXPECT_FALSE(Acquire(b, {1}).has_value());
  EXPECT_EQ(Load(gangs[1]).state(), xmod::v1::QUEUED);
  EXPECT_NE(scheduler_->PendingReason(gangs[1]).find("waiting for a rendezvous port"),
            std::string::npos);
}

TEST_F(GangSchedulerTest, MemberThatNeverTakesItsPartReleasesTheGang) {
  const int64_t run = Submit(/*ranks=*/2, /*per_worker=*/1)[0];
  const int64_t a = RegisterWorker("a");
  const int64_t b = RegisterWorker("b");
  EXPECT_FALSE(Acquire(a).has_value());
  std::optional<xmod::v1::Assignment> part_b = Acquire(b);
  ASSERT_TRUE(part_b.has_value());
  // a never polls again. b's heartbeats keep its own lease, not the gang.
  clock_.Advance(3000);
  EXPECT_TRUE(Beat(b, *part_b).orders().empty());
  EXPECT_EQ(scheduler_->ExpireLeases(), 0);
  clock_.Advance(2001);
  EXPECT_EQ(scheduler_->ExpireLeases(), 1);
  const std::vector<xmod::v1::Attempt> attempts = Attempts(run);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].outcome(), "lost");
  EXPECT_NE(attempts[0].error().find("gang member 1 (a) did not take its part"), std::string::npos)
      << attempts[0].error();
  EXPECT_EQ(Load(run).state(), xmod::v1::QUEUED);
  // b's trainers are stopped; a late poll by a gets nothing of the dead gang.
  EXPECT_TRUE(Killed(Beat(b, *part_b)));
  EXPECT_FALSE(Acquire(a).has_value());
  // The requeued run starts again as a fresh gang (attempt 2) once both poll.
  std::optional<xmod::v1::Assignment> again = Acquire(b);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->attempt(), 2);
  EXPECT_EQ(Acquire(a)->attempt(), 2);
}

TEST_F(GangSchedulerTest, LossOfOneMemberEndsTheAttemptEverywhereAndItResumes) {
  const int64_t run = Submit(/*ranks=*/2, /*per_worker=*/1)[0];
  const int64_t a = RegisterWorker("a");
  const int64_t b = RegisterWorker("b");
  EXPECT_FALSE(Acquire(a).has_value());
  std::optional<xmod::v1::Assignment> part_b = Acquire(b);
  std::optional<xmod::v1::Assignment> part_a = Acquire(a);
  ASSERT_TRUE(part_a && part_b);
  // Member 0 (b) alone reports metrics and checkpoints.
  xmod::v1::ReportMetricsRequest metrics;
  metrics.set_worker_id(a);
  metrics.set_run_id(run);
  metrics.set_attempt(1);
  metrics.set_first_seq(1);
  xmod::v1::MetricPoint* point = metrics.add_points();
  point->set_step(5);
  point->set_name("train/loss");
  point->set_value(2.5);
  EXPECT_TRUE(ingest_->ReportMetrics(metrics)->stale());
  metrics.set_worker_id(b);
  EXPECT_FALSE(ingest_->ReportMetrics(metrics)->stale());
  xmod::v1::ReportCheckpointRequest checkpoint;
  checkpoint.set_worker_id(b);
  checkpoint.set_run_id(run);
  checkpoint.set_attempt(1);
  checkpoint.set_step(5);
  checkpoint.set_path(part_b->spec().checkpoint_dir() + "/step-5.pt");
  checkpoint.set_sha256("abc");
  ASSERT_TRUE(scheduler_->ReportCheckpoint(checkpoint).ok());
  // a's lease lapses (its worker died) while b keeps heartbeating: the attempt is lost.
  clock_.Advance(6000);
  EXPECT_TRUE(Beat(b, *part_b).orders().empty());
  clock_.Advance(4001);
  EXPECT_EQ(scheduler_->ExpireLeases(), 1);
  EXPECT_NE(Attempts(run)[0].error().find("lease of gang member 1 (a) expired"), std::string::npos)
      << Attempts(run)[0].error();
  EXPECT_EQ(Load(run).state(), xmod::v1::QUEUED);
  // b is told to kill its trainers; late reports of the dead gang are fenced off.
  EXPECT_TRUE(Killed(Beat(b, *part_b)));
  EXPECT_TRUE(ingest_->ReportMetrics(metrics)->stale());
  EXPECT_FALSE(scheduler_->ReportCheckpoint(checkpoint).ok());
  // A fresh gang (b and a replacement c) resumes from the checkpoint at step 5.
  const int64_t c = RegisterWorker("c");
  EXPECT_FALSE(Acquire(c).has_value());  // b has not polled lately: reserved, not placed
  std::optional<xmod::v1::Assignment> next_b = Acquire(b);
  ASSERT_TRUE(next_b.has_value());
  EXPECT_EQ(next_b->attempt(), 2);
  EXPECT_EQ(next_b->gang().member(), 0);
  ASSERT_TRUE(next_b->has_resume());
  EXPECT_EQ(next_b->resume().step(), 5);
  std::optional<xmod::v1::Assignment> next_c = Acquire(c);
  ASSERT_TRUE(next_c.has_value());
  EXPECT_EQ(next_c->attempt(), 2);
  EXPECT_EQ(next_c->resume().step(), 5);
  // A member's failure (a rank exiting non-zero) ends attempt 2 for the others too.
  ASSERT_TRUE(Finish(c, *next_c, xmod::v1::OUTCOME_FAILED, kExitFailure).ok());
  EXPECT_EQ(Load(run).state(), xmod::v1::QUEUED);
  EXPECT_NE(Load(run).error().find("gang member 1 (c)"), std::string::npos) << Load(run).error();
  EXPECT_TRUE(Killed(Beat(b, *next_b)));
}

TEST_F(GangSchedulerTest, OpenGangSurvivesARestart) {
  const int64_t run = Submit(/*ranks=*/2, /*per_worker=*/1)[0];
  const int64_t a = RegisterWorker("a");
  const int64_t b = RegisterWorker("b");
  EXPECT_FALSE(Acquire(a).has_value());
  std::optional<xmod::v1::Assignment> part_b = Acquire(b);
  std::optional<xmod::v1::Assignment> part_a = Acquire(a);
  ASSERT_TRUE(part_a && part_b);
  scheduler_.reset();
  ingest_.reset();
  store_.reset();
  Open();
  // Both members still hold the attempt: their heartbeats renew it, nobody is killed.
  EXPECT_TRUE(Beat(a, *part_a).orders().empty());
  EXPECT_TRUE(Beat(b, *part_b).orders().empty());
  EXPECT_EQ(Load(run).state(), xmod::v1::RUNNING);
  // And member 1's failure still ends it.
  ASSERT_TRUE(Finish(a, *part_a, xmod::v1::OUTCOME_FAILED, kExitFailure).ok());
  EXPECT_EQ(Load(run).state(), xmod::v1::QUEUED);
  EXPECT_TRUE(Killed(Beat(b, *part_b)));
  // The workers' advertised hosts and port ranges were stored: the retry forms a gang
  // without the workers registering again.
  clock_.Advance(options_.backoff_base_ms + 1);
  EXPECT_FALSE(Acquire(a).has_value());
  std::optional<xmod::v1::Assignment> retry = Acquire(b);
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->attempt(), 2);
  EXPECT_EQ(retry->gang().rendezvous(), "tcp://host-b:29500");
  EXPECT_EQ(Acquire(a)->gang().host(), "host-a");
}

TEST_F(GangSchedulerTest, AGangsMembersAreRowsOfAttemptMembers) {
  const int64_t run = Submit(/*ranks=*/4, /*per_worker=*/2)[0];
  const int64_t a = RegisterWorker("a", /*slots=*/2);
  const int64_t b = RegisterWorker("b", /*slots=*/2);
  EXPECT_FALSE(Acquire(a, {1, 0}).has_value());
  ASSERT_TRUE(Acquire(b, {0, 1}).has_value());
  std::string members;
  ASSERT_TRUE(store_
                  ->Read([&](Db& db) {
                    absl::StatusOr<Stmt> stmt = db.Prepare(
                        "SELECT member, worker_id, worker, slots FROM attempt_members"
                        " WHERE run_id = ? AND attempt = 1 ORDER BY member");
                    if (!stmt.ok()) return stmt.status();
                    stmt->Bind(1, run);
                    while (true) {
                      absl::StatusOr<bool> row = stmt->Step();
                      if (!row.ok()) return row.status();
                      if (!*row) return absl::OkStatus();
                      absl::StrAppend(&members, stmt->Int(0), " ", stmt->Int(1), " ", stmt->Text(2),
                                      " ", stmt->Text(3), "; ");
                    }
                  })
                  .ok());
  // The poller b is member 0; a's slots are in the order it listed them free.
  EXPECT_EQ(members, absl::StrCat("0 ", b, " b [0,1]; 1 ", a, " a [1,0]; "));
  // The attempts row keeps the joined names and slot lists for user queries.
  EXPECT_EQ(FirstAttemptColumn(run, "worker"), "b,a");
  EXPECT_EQ(SlotsOfFirstAttempt(run), "0,1;1,0");
  EXPECT_EQ(FirstAttemptColumn(run, "worker_id"), absl::StrCat(b));
}

}  // namespace
}  // namespace xmod
