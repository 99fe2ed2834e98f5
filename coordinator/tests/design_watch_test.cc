// An adaptive design's stop reaches the sweep's watchers (docs/adaptive-design.md, "Adaptive
// sweeps"): a WatchSweep stream opened before the seed runs, kept open while they all end and
// the sweep still reads ACTIVE (the design going on), must end with SWEEP_DONE once the
// design's decision stops it, although no run changes then.
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "coordinator/tests/test_util.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

// Runs the acquired run `run_id` to success with one train/loss point: no val/loss, so no
// live Δ is computed later (whose change would reach the watcher on its own).
void FinishRun(xmod::v1::WorkerGateway::Stub& worker, int64_t worker_id, int64_t run_id) {
  xmod::v1::ReportMetricsRequest metrics;
  metrics.set_worker_id(worker_id);
  metrics.set_run_id(run_id);
  metrics.set_attempt(1);
  metrics.set_first_seq(0);
  xmod::v1::MetricPoint* p = metrics.add_points();
  p->set_name("train/loss");
  p->set_step(1);
  p->set_tokens(128);
  p->set_flops(1e12);
  p->set_value(4.0);
  xmod::v1::ReportMetricsResponse ack;
  ASSERT_TRUE(worker.ReportMetrics(BearerContext("").get(), metrics, &ack).ok());
  xmod::v1::FinishRunRequest finish;
  finish.set_worker_id(worker_id);
  finish.set_run_id(run_id);
  finish.set_attempt(1);
  finish.set_outcome(xmod::v1::OUTCOME_SUCCEEDED);
  finish.set_last_acked_seq(ack.acked_seq());
  xmod::v1::FinishRunResponse finished;
  ASSERT_TRUE(worker.FinishRun(BearerContext("").get(), finish, &finished).ok());
}

TEST(DesignWatchTest, AStopDecisionEndsAnOpenWatch) {
  const std::string dir = NewTestDir("design_watch");
  CoordinatorOptions options = LoopbackOptions(dir);
  options.tick_ms = 50;
  // The design decides only once the watcher has seen every seed run end with the sweep
  // still ACTIVE, so that the stop is a change no run makes.
  absl::Notification runs_ended_while_active;
  options.adaptive.TEST_before_decide = [&](int64_t, const std::function<bool()>& stopping) {
    while (!stopping() &&
           !runs_ended_while_active.WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
    }
  };
  absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(options);
  ASSERT_TRUE(c.ok()) << c.status();

  // A budget spent by the seed set, and runs that cannot be fitted (no val/loss): the first
  // decision after the seed set ended stops the design.
  xmod::v1::SubmitSweepRequest request;
  *request.mutable_spec() = AdaptiveTinySweep(dir);
  request.mutable_spec()->mutable_adaptive()->set_compute_budget(1);
  xmod::v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(c->user->SubmitSweep(BearerContext("").get(), request, &submitted).ok());
  const int seed_runs = submitted.runs_size();
  ASSERT_GT(seed_runs, 0);

  std::vector<xmod::v1::WatchSweepEvent> events;
  grpc::Status watch_status;
  absl::Notification snapshot_read;
  std::thread watcher([&] {
    auto context = BearerContext("");
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    xmod::v1::WatchSweepRequest watch;
    watch.set_sweep_id(submitted.sweep_id());
    auto reader = c->user->WatchSweep(context.get(), watch);
    std::map<int64_t, xmod::v1::RunState> states;
    xmod::v1::WatchSweepEvent event;
    while (reader->Read(&event)) {
      events.push_back(event);
      for (const xmod::v1::Run& run : event.runs()) states[run.id()] = run.state();
      int succeeded = 0;
      for (const auto& [id, state] : states) succeeded += state == xmod::v1::SUCCEEDED;
      if (succeeded == seed_runs && event.sweep().state() == xmod::v1::SWEEP_ACTIVE &&
          !runs_ended_while_active.HasBeenNotified()) {
        runs_ended_while_active.Notify();
      }
      if (!snapshot_read.HasBeenNotified()) snapshot_read.Notify();
    }
    watch_status = reader->Finish();
  });
  ASSERT_TRUE(snapshot_read.WaitForNotificationWithTimeout(absl::Seconds(30)));

  xmod::v1::RegisterResponse registered;
  ASSERT_TRUE(c->worker->Register(BearerContext("").get(), CpuWorker("w1", 1), &registered).ok());
  for (int i = 0; i < seed_runs; ++i) {
    xmod::v1::AcquireRunRequest acquire;
    acquire.set_worker_id(registered.worker_id());
    acquire.add_free_slots(0);
    acquire.set_wait_ms(5000);
    xmod::v1::AcquireRunResponse assignment;
    ASSERT_TRUE(c->worker->AcquireRun(BearerContext("").get(), acquire, &assignment).ok());
    ASSERT_TRUE(assignment.has_assignment());
    FinishRun(*c->worker, registered.worker_id(), assignment.assignment().run_id());
  }

  watcher.join();
  EXPECT_TRUE(runs_ended_while_active.HasBeenNotified());
  EXPECT_TRUE(watch_status.ok()) << watch_status.error_message();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().sweep().state(), xmod::v1::SWEEP_DONE);
  // The stream ended on the design's stop.
  xmod::v1::ListDecisionsRequest list;
  list.set_sweep_id(submitted.sweep_id());
  xmod::v1::ListDecisionsResponse decisions;
  ASSERT_TRUE(c->user->ListDecisions(BearerContext("").get(), list, &decisions).ok());
  ASSERT_GT(decisions.decisions_size(), 0);
  EXPECT_TRUE(decisions.decisions(0).stop()) << decisions.decisions(0).ShortDebugString();
  c->coordinator->Shutdown();
}

}  // namespace
}  // namespace xmod
