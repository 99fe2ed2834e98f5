#include "worker/metric_relay.h"

#include <stdlib.h>

#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/files.h"
#include "common/metric_limits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "worker/fake_gateway.h"
#include "worker/spill_file.h"
#include "worker/worker_metrics.h"

namespace xmod {
namespace {

v1::MetricPoint Point(int64_t step) {
  v1::MetricPoint point;
  point.set_step(step);
  point.set_flops(static_cast<double>(step) * 10);
  point.set_name("train/loss");
  point.set_value(1.0 / step);
  return point;
}

class MetricRelayTest : public ::testing::Test {
 protected:
  MetricRelayTest() : relay_(&gateway_, &clock_, Options()) { relay_.set_worker_id(7); }
  static MetricRelayOptions Options() {
    MetricRelayOptions options;
    options.max_batch_points = 4;
    options.initial_backoff_ms = 100;
    options.max_backoff_ms = 400;
    return options;
  }
  // Pumps until nothing more can be sent now.
  void PumpAll() {
    while (relay_.Pump()) {
    }
  }

  FakeGateway gateway_;
  FakeClock clock_;
  MetricRelay relay_;
  const AttemptKey key_{5, 1};
};

TEST_F(MetricRelayTest, NumbersPointsFromOnePerAttempt) {
  relay_.Open(key_);
  EXPECT_EQ(relay_.AddMetric(key_, Point(1)), 1);
  EXPECT_EQ(relay_.AddMetric(key_, Point(2)), 2);
  const AttemptKey retry{5, 2};
  relay_.Open(retry);
  EXPECT_EQ(relay_.AddMetric(retry, Point(3)), 1);
  EXPECT_EQ(relay_.AddMetric({9, 1}, Point(1)), 0);  // not open: dropped
  EXPECT_EQ(relay_.buffered_points(), 3u);
}

TEST_F(MetricRelayTest, DropsPointsOnceAcknowledgedInBatches) {
  relay_.Open(key_);
  for (int step = 1; step <= 10; ++step) relay_.AddMetric(key_, Point(step));
  EXPECT_TRUE(relay_.Pump());
  EXPECT_EQ(relay_.acked_seq(key_), 4);  // one batch of max_batch_points
  EXPECT_EQ(relay_.buffered_points(), 6u);
  PumpAll();
  EXPECT_EQ(relay_.acked_seq(key_), 10);
  EXPECT_EQ(relay_.buffered_points(), 0u);
  EXPECT_EQ(relay_.relayed_points(), 10);
  EXPECT_TRUE(relay_.Delivered(key_));
  auto stored = gateway_.Points(key_);
  ASSERT_EQ(stored.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(stored[i].step(), i + 1);
}

TEST_F(MetricRelayTest, PartialAcksResendOnlyTheRest) {
  gateway_.set_max_ack_per_call(3);
  relay_.Open(key_);
  for (int step = 1; step <= 4; ++step) relay_.AddMetric(key_, Point(step));
  EXPECT_TRUE(relay_.Pump());
  EXPECT_EQ(relay_.acked_seq(key_), 3);
  EXPECT_TRUE(relay_.Pump());
  EXPECT_EQ(relay_.acked_seq(key_), 4);
  EXPECT_EQ(gateway_.Points(key_).size(), 4u);
  EXPECT_EQ(gateway_.duplicate_points(), 0);
}

TEST_F(MetricRelayTest, RetriesWithBackoffAndLosesNothing) {
  relay_.Open(key_);
  for (int step = 1; step <= 6; ++step) relay_.AddMetric(key_, Point(step));
  gateway_.FailNextMetricCalls(3);

  EXPECT_FALSE(relay_.Pump());  // fails: next try in 100 ms
  EXPECT_EQ(gateway_.metric_calls(), 1);
  EXPECT_FALSE(relay_.Pump());  // not due yet: no call
  EXPECT_EQ(gateway_.metric_calls(), 1);
  clock_.Advance(100);
  EXPECT_FALSE(relay_.Pump());  // fails again: next try in 200 ms
  EXPECT_EQ(gateway_.metric_calls(), 2);
  clock_.Advance(199);
  relay_.Pump();
  EXPECT_EQ(gateway_.metric_calls(), 2);
  clock_.Advance(1);
  EXPECT_FALSE(relay_.Pump());  // third failure: 400 ms (the cap)
  clock_.Advance(400);
  // Points that arrive meanwhile join the queue behind the unacknowledged ones.
  relay_.AddMetric(key_, Point(7));
  PumpAll();
  EXPECT_EQ(relay_.acked_seq(key_), 7);
  auto stored = gateway_.Points(key_);
  ASSERT_EQ(stored.size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(stored[i].step(), i + 1);

  // A success resets the backoff: the next failure waits the initial delay again.
  relay_.AddMetric(key_, Point(8));
  gateway_.FailNextMetricCalls(1);
  relay_.Pump();
  clock_.Advance(100);
  PumpAll();
  EXPECT_EQ(relay_.acked_seq(key_), 8);
}

TEST_F(MetricRelayTest, ACheckpointWaitsForThePointsBeforeIt) {
  relay_.Open(key_);
  for (int step = 1; step <= 6; ++step) relay_.AddMetric(key_, Point(step));
  v1::ReportCheckpointRequest checkpoint;
  checkpoint.set_step(6);
  checkpoint.set_path("/ckpt/step-6.pt");
  relay_.AddCheckpoint(key_, checkpoint);
  relay_.AddMetric(key_, Point(7));

  relay_.Pump();  // points 1..4 acknowledged; the checkpoint needs 1..6
  EXPECT_TRUE(gateway_.Checkpoints().empty());
  relay_.Pump();  // points 5..7 acknowledged
  EXPECT_TRUE(gateway_.Checkpoints().empty());
  EXPECT_EQ(relay_.pending_checkpoints(key_), 1u);
  gateway_.FailNextCheckpointCalls(1);
  relay_.Pump();  // checkpoint due, but the call fails
  EXPECT_TRUE(gateway_.Checkpoints().empty());
  EXPECT_FALSE(relay_.Delivered(key_));
  clock_.Advance(100);
  relay_.Pump();
  ASSERT_EQ(gateway_.Checkpoints().size(), 1u);
  const v1::ReportCheckpointRequest sent = gateway_.Checkpoints()[0];
  EXPECT_EQ(sent.worker_id(), 7);
  EXPECT_EQ(sent.run_id(), 5);
  EXPECT_EQ(sent.attempt(), 1);
  EXPECT_EQ(sent.path(), "/ckpt/step-6.pt");
  EXPECT_TRUE(relay_.Delivered(key_));
}

TEST_F(MetricRelayTest, ACheckpointRefusedForGoodIsDroppedAndTheReportsAfterItGoOn) {
  relay_.Open(key_);
  gateway_.RefuseCheckpointsAt("/elsewhere/step-2.pt");
  v1::ReportCheckpointRequest refused;
  refused.set_step(2);
  refused.set_path("/elsewhere/step-2.pt");
  relay_.AddCheckpoint(key_, refused);
  v1::ReportCheckpointRequest good;
  good.set_step(4);
  good.set_path("/ckpt/step-4.pt");
  relay_.AddCheckpoint(key_, good);

  relay_.Pump();
  ASSERT_EQ(gateway_.Checkpoints().size(), 1u);
  EXPECT_EQ(gateway_.Checkpoints()[0].path(), "/ckpt/step-4.pt");
  EXPECT_EQ(relay_.pending_checkpoints(key_), 0u);
  EXPECT_EQ(relay_.refused_checkpoints(key_), std::set<std::string>{"/elsewhere/step-2.pt"});
  EXPECT_TRUE(relay_.Delivered(key_));
}

TEST_F(MetricRelayTest, AStaleAttemptIsDroppedAndReported) {
  std::vector<AttemptKey> stale;
  relay_.set_stale_callback([&](AttemptKey key, const std::string& refusal) {
    stale.push_back(key);
    EXPECT_EQ(refusal, "");
  });
  relay_.Open(key_);
  relay_.AddMetric(key_, Point(1));
  gateway_.MarkStale(key_);
  relay_.Pump();
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0], key_);
  EXPECT_TRUE(relay_.stale(key_));
  EXPECT_EQ(relay_.buffered_points(), 0u);
  EXPECT_EQ(relay_.AddMetric(key_, Point(2)), 0);
  EXPECT_FALSE(relay_.WaitDelivered(key_, nullptr));  // returns at once
}

TEST_F(MetricRelayTest, APointWithANameOverTheLimitIsDroppedBeforeItIsNumbered) {
  prometheus::Registry registry;
  WorkerMetrics metrics(registry);
  MetricRelay relay(&gateway_, &clock_, Options(), &metrics);
  relay.Open(key_);
  v1::MetricPoint longest = Point(1);
  longest.set_name(std::string(kMaxMetricNameBytes, 'n'));
  v1::MetricPoint too_long = Point(2);
  too_long.set_name(std::string(kMaxMetricNameBytes + 1, 'n'));
  EXPECT_EQ(relay.AddMetric(key_, longest), 1);
  EXPECT_EQ(relay.AddMetric(key_, too_long), 0);  // the coordinator would refuse its batch
  EXPECT_EQ(relay.AddMetric(key_, Point(3)), 2);
  EXPECT_EQ(metrics.points_dropped_name_too_long.Value(), 1);
  v1::FinishRunRequest finish;
  finish.set_outcome(v1::OUTCOME_SUCCEEDED);
  relay.Finish(key_, finish);
  while (relay.Pump()) {
  }
  ASSERT_EQ(gateway_.Points(key_).size(), 2u);
  EXPECT_EQ(gateway_.Points(key_)[1].step(), 3);
  ASSERT_EQ(gateway_.Finishes().size(), 1u);
  EXPECT_EQ(gateway_.Finishes()[0].outcome(), v1::OUTCOME_SUCCEEDED);
  EXPECT_EQ(gateway_.Finishes()[0].last_seq(), 2);
  EXPECT_TRUE(relay.open_attempts().empty());
}

// The coordinator stores an attempt's points only contiguously: a batch it refuses for good
// ends the attempt (its FinishRun says why), instead of being retried forever.
TEST_F(MetricRelayTest, AMetricReportRefusedForGoodEndsTheAttemptWithItsFinishRun) {
  prometheus::Registry registry;
  WorkerMetrics metrics(registry);
  MetricRelay relay(&gateway_, &clock_, Options(), &metrics);
  std::vector<std::string> refusals;
  relay.set_stale_callback(
      [&](AttemptKey, const std::string& refusal) { refusals.push_back(refusal); });
  int64_t run = 50;
  for (absl::StatusCode code :
       {absl::StatusCode::kInvalidArgument, absl::StatusCode::kPermissionDenied,
        absl::StatusCode::kAlreadyExists}) {
    const AttemptKey key{++run, 1};
    relay.Open(key);
    for (int step = 1; step <= 4; ++step) relay.AddMetric(key, Point(step));
    relay.Pump();  // 1..4 acknowledged
    for (int step = 5; step <= 8; ++step) relay.AddMetric(key, Point(step));
    v1::ReportCheckpointRequest checkpoint;
    checkpoint.set_step(8);
    checkpoint.set_path("/ckpt/step-8.pt");
    relay.AddCheckpoint(key, checkpoint);
    gateway_.FailNextMetricCalls(1, code);
    relay.Pump();
    ASSERT_EQ(refusals.size(), static_cast<size_t>(run - 50)) << absl::StatusCodeToString(code);
    EXPECT_THAT(refusals.back(), ::testing::HasSubstr("refused metric points 5..8 for good"));
    EXPECT_THAT(refusals.back(), ::testing::HasSubstr(absl::StatusCodeToString(code)));
    EXPECT_TRUE(relay.stale(key));
    EXPECT_EQ(relay.buffered_points(), 0u);
    EXPECT_EQ(relay.AddMetric(key, Point(9)), 0);

    v1::FinishRunRequest finish;
    finish.set_outcome(v1::OUTCOME_SUCCEEDED);
    relay.Finish(key, finish);
    int calls = 0;
    while (!relay.open_attempts().empty()) {
      relay.Pump();
      clock_.Advance(1000);
      ASSERT_LT(++calls, 10) << "the attempt never closes";
    }
    const v1::FinishRunRequest sent = gateway_.Finishes().back();
    EXPECT_EQ(sent.run_id(), run);
    EXPECT_EQ(sent.outcome(), v1::OUTCOME_FAILED);  // its metrics are incomplete
    EXPECT_EQ(sent.error(), refusals.back());
    EXPECT_EQ(sent.last_seq(), 8);
    EXPECT_EQ(sent.last_acked_seq(), 4);
    EXPECT_EQ(gateway_.Points(key).size(), 4u);
  }
  EXPECT_TRUE(gateway_.Checkpoints().empty());  // after points that were never stored
  EXPECT_EQ(metrics.points_dropped_refused.Value(), 12);
}

TEST_F(MetricRelayTest, AnAttemptWhoseReportsOnlyGetErrorsIsNoLongerWorthALease) {
  relay_.Open(key_);
  relay_.AddMetric(key_, Point(1));
  EXPECT_EQ(relay_.attempts_to_hold(3000).size(), 1u);
  // The coordinator answers, with an error the relay retries.
  gateway_.FailNextMetricCalls(1'000'000, absl::StatusCode::kInternal);
  relay_.Pump();
  clock_.Advance(3000);
  relay_.Pump();
  EXPECT_EQ(relay_.attempts_to_hold(3000).size(), 1u);
  clock_.Advance(1);
  EXPECT_TRUE(relay_.attempts_to_hold(3000).empty());
  EXPECT_EQ(relay_.open_attempts().size(), 1u);  // still retried
  // An outage does not count: the coordinator may answer once it is back.
  gateway_.FailNextMetricCalls(1'000'000, absl::StatusCode::kUnavailable);
  clock_.Advance(1000);
  relay_.Pump();
  clock_.Advance(10'000);
  EXPECT_EQ(relay_.attempts_to_hold(3000).size(), 1u);
  gateway_.FailNextMetricCalls(1, absl::StatusCode::kInternal);
  relay_.Pump();
  gateway_.FailNextMetricCalls(0);
  clock_.Advance(1000);
  relay_.Pump();  // progress: held again however long it took
  clock_.Advance(10'000);
  EXPECT_EQ(relay_.attempts_to_hold(3000).size(), 1u);
  EXPECT_EQ(relay_.acked_seq(key_), 1);
}

TEST_F(MetricRelayTest, PumpLoopDeliversWhileAWaiterBlocks) {
  relay_.Open(key_);
  for (int step = 1; step <= 9; ++step) relay_.AddMetric(key_, Point(step));
  absl::Notification stop;
  std::thread pump([&] { relay_.RunPumpLoop(&stop); });
  EXPECT_TRUE(relay_.WaitDelivered(key_, nullptr));
  stop.Notify();
  pump.join();
  EXPECT_EQ(gateway_.Points(key_).size(), 9u);
}

TEST_F(MetricRelayTest, AbandonEndsTheWait) {
  relay_.Open(key_);
  relay_.AddMetric(key_, Point(1));
  absl::Notification abandon;
  abandon.Notify();
  EXPECT_FALSE(relay_.WaitDelivered(key_, &abandon));  // nobody pumps
  relay_.Close(key_);
  EXPECT_EQ(relay_.buffered_points(), 0u);
}

// A relay with a memory bound of 8 points per attempt that spills into a fresh folder.
class SpillingRelayTest : public ::testing::Test {
 protected:
  SpillingRelayTest() {
    char tmpl[] = "/tmp/xmod_spill_XXXXXX";
    dir_ = mkdtemp(tmpl);
    options_.max_batch_points = 4;
    options_.initial_backoff_ms = 100;
    options_.max_backoff_ms = 400;
    options_.max_memory_points = 8;
    options_.spill_dir = dir_ + "/spill";
  }
  ~SpillingRelayTest() override { std::filesystem::remove_all(dir_); }

  // The seq of the first record of the spill file at `path` (-1: none), which stays.
  static int64_t FirstSeq(const std::string& path) {
    absl::StatusOr<std::unique_ptr<SpillFile>> file = SpillFile::Open(path);
    if (!file.ok()) return -1;
    (*file)->Release();
    int64_t seq = -1;
    v1::MetricPoint point;
    absl::StatusOr<bool> read = (*file)->ReadNext(&seq, &point);
    return read.ok() && *read ? seq : -1;
  }

  size_t SpillFiles() const {
    size_t n = 0;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(options_.spill_dir, error)) {
      (void)entry;
      ++n;
    }
    return n;
  }

  // Opens key_ on `relay` and adds points 1..16, of which 1..4 are acknowledged before the
  // coordinator goes away.
  void AddPointsTheCoordinatorMisses(MetricRelay& relay) {
    relay.Open(key_);
    for (int step = 1; step <= 4; ++step) relay.AddMetric(key_, Point(step));
    relay.Pump();                             // 1..4 acknowledged
    gateway_.FailNextMetricCalls(1'000'000);  // then the coordinator is away
    for (int step = 5; step <= 16; ++step) relay.AddMetric(key_, Point(step));
  }

  std::string dir_;
  MetricRelayOptions options_;
  FakeGateway gateway_;
  FakeClock clock_;
  const AttemptKey key_{5, 1};
};

TEST_F(SpillingRelayTest, AnOutageLongerThanTheMemoryBoundLosesNothing) {
  MetricRelay relay(&gateway_, &clock_, options_);
  relay.set_worker_id(7);
  relay.Open(key_);
  gateway_.FailNextMetricCalls(1'000'000);  // the coordinator is away
  for (int step = 1; step <= 100; ++step) {
    EXPECT_EQ(relay.AddMetric(key_, Point(step)), step);
    relay.Pump();
    clock_.Advance(1000);
    EXPECT_LE(relay.memory_points(), 8u) << "after point " << step;
  }
  EXPECT_EQ(relay.buffered_points(), 100u);
  EXPECT_EQ(relay.spilled_points(), 92u);
  EXPECT_EQ(SpillFiles(), 1u);
  EXPECT_TRUE(gateway_.Points(key_).empty());

  // A checkpoint after point 100 waits for every spilled point.
  v1::ReportCheckpointRequest checkpoint;
  checkpoint.set_step(100);
  checkpoint.set_path("/ckpt/step-100.pt");
  relay.AddCheckpoint(key_, checkpoint);

  gateway_.FailNextMetricCalls(0);  // it is back
  clock_.Advance(1000);
  int calls = 0;
  while (relay.Pump()) {
    EXPECT_LE(relay.memory_points(), 8u);
    ASSERT_LT(++calls, 1000);
  }
  EXPECT_EQ(relay.acked_seq(key_), 100);
  EXPECT_EQ(relay.buffered_points(), 0u);
  EXPECT_EQ(relay.spilled_points(), 0u);
  EXPECT_TRUE(relay.Delivered(key_));
  const std::vector<v1::MetricPoint> stored = gateway_.Points(key_);
  ASSERT_EQ(stored.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(stored[i].step(), i + 1) << "in order";
  EXPECT_EQ(gateway_.duplicate_points(), 0);
  ASSERT_EQ(gateway_.Checkpoints().size(), 1u);
  EXPECT_EQ(SpillFiles(), 0u);  // deleted once every point in it was acknowledged
}

// A spill volume that is full: the spill file's path leads to /dev/full, where every write
// fails with ENOSPC. Points past the memory bound stay in memory up to max_overflow_points
// more; the next one stops the attempt, and every point it reported is still delivered.
TEST_F(SpillingRelayTest, AFullSpillVolumeHoldsPointsInMemoryUpToABoundThenEndsTheAttempt) {
  options_.max_overflow_points = 4;
  prometheus::Registry registry;
  WorkerMetrics metrics(registry);
  MetricRelay relay(&gateway_, &clock_, options_, &metrics);
  relay.set_worker_id(7);
  std::vector<std::string> stops;
  relay.set_stale_callback([&](AttemptKey, const std::string& why) { stops.push_back(why); });
  std::filesystem::create_symlink("/dev/full", options_.spill_dir + "/run-5-a1.spill");
  relay.Open(key_);
  gateway_.FailNextMetricCalls(1'000'000);  // the coordinator is away: points pile up
  for (int step = 1; step <= 12; ++step) EXPECT_EQ(relay.AddMetric(key_, Point(step)), step);
  EXPECT_EQ(relay.memory_points(), 12u);  // 8, and 4 that could not be spilled
  EXPECT_TRUE(stops.empty());
  v1::ReportCheckpointRequest before;
  before.set_step(12);
  before.set_path("/ckpt/step-12.pt");
  relay.AddCheckpoint(key_, before);

  // Point 13 is past the bound: it and everything after is dropped, the attempt must stop.
  EXPECT_EQ(relay.AddMetric(key_, Point(13)), 0);
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_THAT(stops[0], ::testing::HasSubstr("the metric buffer is full"));
  EXPECT_THAT(stops[0], ::testing::HasSubstr("No space left on device"));
  EXPECT_EQ(relay.AddMetric(key_, Point(14)), 0);
  v1::ReportCheckpointRequest after;
  after.set_step(14);
  after.set_path("/ckpt/step-14.pt");
  relay.AddCheckpoint(key_, after);  // its points are incomplete: never a resume point
  EXPECT_EQ(stops.size(), 1u);
  EXPECT_FALSE(relay.stale(key_));  // what it holds is still delivered
  v1::FinishRunRequest finish;
  finish.set_outcome(v1::OUTCOME_FAILED);  // the worker killed it
  relay.Finish(key_, finish);

  gateway_.FailNextMetricCalls(0);  // the coordinator is back
  int calls = 0;
  while (!relay.open_attempts().empty()) {
    relay.Pump();
    clock_.Advance(1000);
    ASSERT_LT(++calls, 100) << "the attempt never closes";
  }
  const std::vector<v1::MetricPoint> stored = gateway_.Points(key_);
  ASSERT_EQ(stored.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(stored[i].step(), i + 1);
  ASSERT_EQ(gateway_.Checkpoints().size(), 1u);
  EXPECT_EQ(gateway_.Checkpoints()[0].step(), 12);
  const v1::FinishRunRequest sent = gateway_.Finishes().back();
  EXPECT_EQ(sent.outcome(), v1::OUTCOME_FAILED);
  EXPECT_EQ(sent.error(), stops[0]);
  EXPECT_EQ(sent.last_seq(), 12);
  EXPECT_EQ(metrics.points_dropped_buffer_full.Value(), 2);
}

TEST_F(SpillingRelayTest, TheSpillFileGoesOnceAcknowledgedAndComesBackWhenNeeded) {
  MetricRelay relay(&gateway_, &clock_, options_);
  relay.Open(key_);
  gateway_.FailNextMetricCalls(1'000'000);
  for (int step = 1; step <= 12; ++step) relay.AddMetric(key_, Point(step));
  EXPECT_EQ(relay.spilled_points(), 4u);
  gateway_.FailNextMetricCalls(0);
  clock_.Advance(1000);
  relay.Pump();  // 1..4 acknowledged: 9..12 come back into memory, the file stays
  EXPECT_EQ(relay.spilled_points(), 0u);
  EXPECT_EQ(relay.memory_points(), 8u);
  EXPECT_EQ(SpillFiles(), 1u);
  while (relay.Pump()) {
  }
  EXPECT_EQ(SpillFiles(), 0u);
  // A second outage spills again, into a new file, and still in order.
  gateway_.FailNextMetricCalls(1'000'000);
  for (int step = 13; step <= 30; ++step) relay.AddMetric(key_, Point(step));
  EXPECT_EQ(relay.memory_points(), 8u);
  EXPECT_EQ(SpillFiles(), 1u);
  gateway_.FailNextMetricCalls(0);
  clock_.Advance(1000);
  while (relay.Pump()) {
  }
  const std::vector<v1::MetricPoint> stored = gateway_.Points(key_);
  ASSERT_EQ(stored.size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(stored[i].step(), i + 1);
  EXPECT_EQ(SpillFiles(), 0u);
}

TEST_F(SpillingRelayTest, ClosingOrAStaleAttemptDeletesItsSpillFile) {
  MetricRelay relay(&gateway_, &clock_, options_);
  relay.Open(key_);
  for (int step = 1; step <= 10; ++step) relay.AddMetric(key_, Point(step));
  EXPECT_EQ(SpillFiles(), 1u);
  gateway_.MarkStale(key_);
  relay.Pump();
  EXPECT_TRUE(relay.stale(key_));
  EXPECT_EQ(relay.buffered_points(), 0u);
  EXPECT_EQ(SpillFiles(), 0u);
  const AttemptKey other{6, 1};
  relay.Open(other);
  for (int step = 1; step <= 10; ++step) relay.AddMetric(other, Point(step));
  EXPECT_EQ(SpillFiles(), 1u);
  relay.Close(other);
  EXPECT_EQ(SpillFiles(), 0u);
  EXPECT_EQ(relay.buffered_points(), 0u);
}

TEST_F(SpillingRelayTest, SpillFilesOfAnEarlierLifeAreDeletedAtStart) {
  // Their attempts ended with the worker that wrote them; the coordinator re-runs those
  // attempts from their latest checkpoint.
  ASSERT_TRUE(MakeDirs(options_.spill_dir).ok());
  ASSERT_TRUE(WriteFileAtomic(options_.spill_dir + "/run-3-a1.spill", "old").ok());
  ASSERT_TRUE(WriteFileAtomic(options_.spill_dir + "/notes.txt", "kept").ok());
  MetricRelay relay(&gateway_, &clock_, options_);
  EXPECT_FALSE(ReadFile(options_.spill_dir + "/run-3-a1.spill").ok());
  EXPECT_TRUE(ReadFile(options_.spill_dir + "/notes.txt").ok());
}

TEST_F(SpillingRelayTest, WhatAStoppingRelayKeepsTheNextOneDelivers) {
  v1::FinishRunRequest finish;
  finish.set_outcome(v1::OUTCOME_PREEMPTED);
  {
    MetricRelay relay(&gateway_, &clock_, options_);
    AddPointsTheCoordinatorMisses(relay);
    v1::ReportCheckpointRequest checkpoint;
    checkpoint.set_step(16);
    checkpoint.set_path("/ckpt/step-16.pt");
    relay.AddCheckpoint(key_, checkpoint);
    relay.Finish(key_, finish);
    clock_.Advance(1000);
    relay.Pump();
    const AttemptKey unfinished{6, 1};  // still open without a FinishRun: not kept
    relay.Open(unfinished);
    relay.AddMetric(unfinished, Point(1));
    EXPECT_EQ(relay.Keep(), 1);
  }
  EXPECT_EQ(SpillFiles(), 2u);  // run-5-a1.spill and run-5-a1.outcome
  EXPECT_TRUE(gateway_.Finishes().empty());

  gateway_.FailNextMetricCalls(0);
  MetricRelay next(&gateway_, &clock_, options_);
  next.set_worker_id(8);
  EXPECT_EQ(next.buffered_points(), 12u);
  ASSERT_EQ(next.open_attempts().size(), 1u);
  EXPECT_EQ(next.open_attempts()[0], key_);
  while (next.Pump()) {
  }
  const std::vector<v1::MetricPoint> stored = gateway_.Points(key_);
  ASSERT_EQ(stored.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(stored[i].step(), i + 1) << "in order";
  EXPECT_EQ(gateway_.duplicate_points(), 0);
  ASSERT_EQ(gateway_.Checkpoints().size(), 1u);
  EXPECT_EQ(gateway_.Checkpoints()[0].worker_id(), 8);
  ASSERT_EQ(gateway_.Finishes().size(), 1u);
  const v1::FinishRunRequest sent = gateway_.Finishes()[0];
  EXPECT_EQ(sent.run_id(), 5);
  EXPECT_EQ(sent.outcome(), v1::OUTCOME_PREEMPTED);
  EXPECT_EQ(sent.last_seq(), 16);
  EXPECT_EQ(sent.last_acked_seq(), 16);
  EXPECT_TRUE(next.open_attempts().empty());
  EXPECT_EQ(SpillFiles(), 0u);
}

TEST_F(SpillingRelayTest, AFailedKeepLeavesWhatAnEarlierLifeKept) {
  v1::FinishRunRequest finish;
  finish.set_outcome(v1::OUTCOME_PREEMPTED);
  {
    MetricRelay relay(&gateway_, &clock_, options_);
    AddPointsTheCoordinatorMisses(relay);
    relay.Finish(key_, finish);
    EXPECT_EQ(relay.Keep(), 1);
  }
  const std::string spill = options_.spill_dir + "/run-5-a1.spill";
  const std::string outcome = options_.spill_dir + "/run-5-a1.outcome";
  {
    // The next life delivers 5..8, then cannot save the rest again (here: a folder where its
    // temporary spill file goes; in life: a full disk).
    MetricRelay relay(&gateway_, &clock_, options_);
    gateway_.FailNextMetricCalls(0);
    relay.Pump();
    EXPECT_EQ(relay.acked_seq(key_), 8);
    gateway_.FailNextMetricCalls(1'000'000);
    std::filesystem::create_directory(spill + ".tmp");
    EXPECT_EQ(relay.Keep(), 0);
  }
  EXPECT_TRUE(std::filesystem::exists(spill));
  EXPECT_TRUE(std::filesystem::exists(outcome));
  EXPECT_EQ(FirstSeq(spill), 5);  // the earlier life's file, from its acked_seq + 1
  std::filesystem::remove(spill + ".tmp");

  gateway_.FailNextMetricCalls(0);
  MetricRelay last(&gateway_, &clock_, options_);
  while (last.Pump()) {
  }
  const std::vector<v1::MetricPoint> stored = gateway_.Points(key_);
  ASSERT_EQ(stored.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(stored[i].step(), i + 1) << "in order";
  EXPECT_EQ(gateway_.duplicate_points(), 0);  // 5..8, acknowledged, are not sent again
  ASSERT_EQ(gateway_.Finishes().size(), 1u);
  EXPECT_EQ(gateway_.Finishes()[0].outcome(), v1::OUTCOME_PREEMPTED);
  EXPECT_EQ(gateway_.Finishes()[0].last_seq(), 16);
  EXPECT_EQ(SpillFiles(), 0u);
}

TEST_F(SpillingRelayTest, AKeptAttemptThatIsNoLongerCurrentIsDroppedNotRetried) {
  {
    MetricRelay relay(&gateway_, &clock_, options_);
    gateway_.FailNextMetricCalls(1'000'000);
    relay.Open(key_);
    for (int step = 1; step <= 10; ++step) relay.AddMetric(key_, Point(step));
    relay.Finish(key_, v1::FinishRunRequest());
    EXPECT_EQ(relay.Keep(), 1);
  }
  gateway_.FailNextMetricCalls(0);
  gateway_.MarkStale(key_);  // the coordinator ended the attempt meanwhile
  MetricRelay next(&gateway_, &clock_, options_);
  int calls = 0;
  while (!next.open_attempts().empty()) {
    next.Pump();
    ASSERT_LT(++calls, 10);
  }
  EXPECT_TRUE(gateway_.Points(key_).empty());
  EXPECT_EQ(gateway_.Finishes().size(), 1u);  // refused or a no-op there; sent once
  EXPECT_EQ(SpillFiles(), 0u);
}

}  // namespace
}  // namespace xmod
