#include "worker/agent.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/metric_limits.h"
#include "common/poll.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer_contract/exit_codes.h"
#include "worker/fake_gateway.h"
#include "worker/fake_process.h"
#include "worker/gpu_monitor.h"

namespace xmod {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::Slot CpuSlot(int index, int cores) {
  v1::Slot slot;
  slot.set_index(index);
  slot.set_kind(v1::CPU);
  slot.set_cores(cores);
  return slot;
}

v1::Assignment MakeAssignment(int64_t run_id, int32_t attempt, int32_t slot) {
  v1::Assignment assignment;
  assignment.set_run_id(run_id);
  assignment.set_attempt(attempt);
  assignment.add_slots(slot);
  assignment.mutable_spec()->set_run_id(run_id);
  assignment.mutable_spec()->set_attempt(attempt);
  assignment.mutable_spec()->mutable_training()->set_seq_len(64);
  return assignment;
}

// FakeClock's monotonic reading before any Advance.
const int64_t kStartMono = FakeClock().MonotonicMillis();

// Polls `done` until it holds (bounded: 30 s).
void WaitUntil(const std::function<bool()>& done) {
  ASSERT_TRUE(PollUntil(done, absl::Seconds(30), absl::Milliseconds(1)));
}

// Exits 75 after a checkpoint on SIGTERM, like xmod-train.
void CheckpointOnTerm(FakeChild& child, int signo) {
  if (signo != SIGTERM) return;
  child.EmitCheckpoint(9, "/ckpt/step-9.pt");
  child.Exit(75);
}

class AgentTest : public ::testing::Test {
 protected:
  AgentTest() : probe_({CpuSlot(0, 2), CpuSlot(1, 3)}) {
    char tmpl[] = "/tmp/xmod_agent_XXXXXX";
    dir_ = mkdtemp(tmpl);
    options_.worker_name = "w1";
    options_.hostname = "host";
    options_.work_dir = dir_;
    options_.train_bin = "/opt/xmod/xmod-train";
    options_.acquire_wait_ms = 20;
    options_.kill_grace_ms = 5'000;
    options_.retry_delay_ms = 10;
  }
  ~AgentTest() override {
    agent_.reset();
    system(("rm -rf " + dir_).c_str());
  }

  // Registers and starts every loop.
  void StartAgent() {
    agent_ = std::make_unique<Agent>(options_, &gateway_, &launcher_, &probe_, &clock_);
    ASSERT_TRUE(agent_->Register().ok());
    agent_->Start();
  }

  std::string dir_;
  AgentOptions options_;
  FakeGateway gateway_;
  FakeLauncher launcher_;
  FixedDeviceProbe probe_;
  FakeClock clock_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentTest, RegistersItsSlots) {
  StartAgent();
  auto registrations = gateway_.Registrations();
  ASSERT_EQ(registrations.size(), 1u);
  EXPECT_EQ(registrations[0].worker_name(), "w1");
  ASSERT_EQ(registrations[0].slots_size(), 2);
  EXPECT_EQ(registrations[0].slots(1).cores(), 3);
  EXPECT_EQ(agent_->worker_id(), FakeGateway::kWorkerId);
}

TEST_F(AgentTest, RunsAChildAndReportsSuccessAfterItsMetrics) {
  StartAgent();
  v1::Assignment assignment = MakeAssignment(11, 2, 1);
  assignment.mutable_resume()->set_path("/ckpt/step-3.pt");
  assignment.mutable_resume()->set_sha256("cc");
  assignment.mutable_resume()->set_bytes(7);
  gateway_.QueueAssignment(assignment);
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);

  // Command line, environment, spec file.
  const std::string attempt_dir = dir_ + "/run-11-a2";
  // The lease deadline: the fake clock's monotonic time at AcquireRun + the registered TTL
  // (1000 ms) - the margin (100 ms).
  EXPECT_THAT(child->options().argv,
              ElementsAre("/opt/xmod/xmod-train", "--spec", attempt_dir + "/spec.pb", "--events_fd",
                          "3", "--threads", "3", "--lease_deadline_ms",
                          std::to_string(kStartMono + 900), "--lease_fd", "4", "--resume",
                          "/ckpt/step-3.pt", "--resume_sha256", "cc", "--resume_bytes", "7"));
  EXPECT_EQ(child->options().control_fd, 4);
  EXPECT_THAT(
      child->options().env,
      ::testing::IsSupersetOf({std::pair<std::string, std::string>("OMP_NUM_THREADS", "3"),
                               std::pair<std::string, std::string>("MKL_NUM_THREADS", "3")}));
  EXPECT_EQ(child->options().log_path, attempt_dir + "/train.log");
  v1::RunSpec spec;
  ASSERT_TRUE(spec.ParseFromString(*ReadFile(attempt_dir + "/spec.pb")));
  EXPECT_EQ(spec.run_id(), 11);
  EXPECT_EQ(spec.attempt(), 2);
  EXPECT_EQ(spec.training().seq_len(), 64);
  EXPECT_EQ(spec.checkpoint_dir(), dir_ + "/run-11/checkpoints");  // filled in when unset
  EXPECT_THAT(agent_->FreeSlots(), ElementsAre(0));

  gateway_.set_max_ack_per_call(2);  // acknowledgement needs several calls
  for (int step = 1; step <= 7; ++step) child->EmitMetric(step, "train/loss", 1.0 / step);
  v1::TrainerEvent finished;
  finished.mutable_finished()->set_steps(7);
  child->Emit(finished);
  child->Exit(0);

  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.run_id(), 11);
  EXPECT_EQ(finish.attempt(), 2);
  EXPECT_EQ(finish.worker_id(), FakeGateway::kWorkerId);
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_SUCCEEDED);
  EXPECT_EQ(finish.exit_code(), 0);
  EXPECT_EQ(finish.last_acked_seq(), 7);
  EXPECT_EQ(finish.last_seq(), 7);
  // Every point was durable before FinishRun was sent.
  auto points = gateway_.Points({11, 2});
  ASSERT_EQ(points.size(), 7u);
  EXPECT_EQ(points.back().step(), 7);
}

// A run on a CUDA slot is measured by the GPU monitor: the most memory NVML saw its trainer
// hold on its GPU goes into its FinishRun; a run on a CPU slot reports none.
TEST_F(AgentTest, ARunOnAGpuReportsItsPeakGpuMemory) {
  const std::string state = dir_ + "/nvml_state";
  setenv("FAKE_NVML_STATE", state.c_str(), 1);
  absl::StatusOr<std::unique_ptr<GpuTelemetry>> telemetry = GpuTelemetry::Load(XMOD_FAKE_NVML);
  ASSERT_TRUE(telemetry.ok()) << telemetry.status();
  prometheus::Registry registry;
  GpuMonitor monitor(*std::move(telemetry), registry, absl::ZeroDuration());
  v1::Slot gpu;
  gpu.set_index(0);
  gpu.set_kind(v1::CUDA);
  gpu.set_device(3);  // NVML's GPU 3
  gpu.set_cores(2);
  probe_ = FixedDeviceProbe({gpu, CpuSlot(1, 2)});
  options_.gpu_monitor = &monitor;
  StartAgent();
  gateway_.QueueAssignment(MakeAssignment(21, 1, 0));
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  std::string gpus;
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&gpus, "gpu ", i, " 50 ", i == 3 ? 9000 : 100, " 80000 - 40 NVIDIA H200\n");
  }
  ASSERT_TRUE(WriteFileAtomic(state, absl::StrCat(gpus, "proc 3 ", child->pid(), " 6000\n")).ok());
  ASSERT_TRUE(monitor.SampleOnce().ok());
  ASSERT_TRUE(WriteFileAtomic(state, absl::StrCat(gpus, "proc 3 ", child->pid(), " 2000\n")).ok());
  ASSERT_TRUE(monitor.SampleOnce().ok());
  child->Exit(0);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  EXPECT_EQ(gateway_.Finishes()[0].peak_gpu_memory_bytes(), 6000);

  gateway_.QueueAssignment(MakeAssignment(22, 1, 1));  // the CPU slot
  child = launcher_.WaitForChild(1);
  ASSERT_NE(child, nullptr);
  ASSERT_TRUE(monitor.SampleOnce().ok());
  child->Exit(0);
  ASSERT_TRUE(gateway_.WaitForFinishes(2));
  EXPECT_EQ(gateway_.Finishes()[1].peak_gpu_memory_bytes(), 0);
}

TEST_F(AgentTest, AFailingChildIsReportedWithItsStderr) {
  StartAgent();
  gateway_.QueueAssignment(MakeAssignment(12, 1, 0));
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  child->EmitMetric(1, "train/loss", 5.0);
  child->Exit(3, "step 1\nRuntimeError: out of memory\n");
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_FAILED);
  EXPECT_EQ(finish.exit_code(), 3);
  EXPECT_THAT(finish.error(), HasSubstr("RuntimeError: out of memory"));
  EXPECT_EQ(finish.last_acked_seq(), 1);
  EXPECT_EQ(gateway_.Points({12, 1}).size(), 1u);
}

TEST_F(AgentTest, ACrashWithoutStderrNamesTheSignal) {
  StartAgent();
  gateway_.QueueAssignment(MakeAssignment(13, 1, 0));
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  child->Kill(SIGSEGV);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_FAILED);
  EXPECT_EQ(finish.exit_code(), 128 + SIGSEGV);
  EXPECT_THAT(finish.error(), HasSubstr("signal"));
}

TEST_F(AgentTest, AChildThatCannotStartIsReportedFailed) {
  StartAgent();
  launcher_.FailNextStart(absl::InternalError("fork: out of processes"));
  gateway_.QueueAssignment(MakeAssignment(14, 1, 0));
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_FAILED);
  EXPECT_THAT(finish.error(), HasSubstr("out of processes"));
  EXPECT_EQ(launcher_.started(), 0u);
  EXPECT_EQ(agent_->FreeSlots().size(), 2u);
}

TEST_F(AgentTest, AStopOrderStopsTheChildAndReportsCancelled) {
  launcher_.set_on_start([](FakeChild& child) { child.set_on_signal(CheckpointOnTerm); });
  StartAgent();
  gateway_.QueueAssignment(MakeAssignment(15, 1, 0));
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  v1::Order order;
  order.set_run_id(15);
  order.set_attempt(1);
  order.set_action(v1::STOP);
  gateway_.QueueOrder(order);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  EXPECT_THAT(child->signals(), ElementsAre(SIGTERM));
  v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_CANCELLED);
  EXPECT_EQ(finish.exit_code(), 75);
  // The checkpoint written on SIGTERM was reported before the end of the attempt.
  ASSERT_EQ(gateway_.Checkpoints().size(), 1u);
  EXPECT_EQ(gateway_.Checkpoints()[0].path(), "/ckpt/step-9.pt");
}

TEST_F(AgentTest, AChildIgnoringSigtermIsKilledAfterTheGracePeriod) {
  launcher_.set_on_start([](FakeChild& child) { child.set_on_signal([](FakeChild&, int) {}); });
  agent_ = std::make_unique<Agent>(options_, &gateway_, &launcher_, &probe_, &clock_);
  ASSERT_TRUE(agent_->Register().ok());
  gateway_.QueueAssignment(MakeAssignment(16, 1, 0));
  ASSERT_TRUE(*agent_->AcquireOnce());
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  v1::Order order;
  order.set_run_id(16);
  order.set_attempt(1);
  order.set_action(v1::PREEMPT);
  gateway_.QueueOrder(order);
  ASSERT_TRUE(agent_->HeartbeatOnce().ok());
  EXPECT_THAT(child->signals(), ElementsAre(SIGTERM));
  clock_.Advance(options_.kill_grace_ms - 1);
  agent_->EnforceGrace();
  EXPECT_FALSE(child->exited());
  clock_.Advance(1);
  agent_->EnforceGrace();
  EXPECT_THAT(child->signals(), ElementsAre(SIGTERM, SIGKILL));
  EXPECT_TRUE(child->exited());
  agent_->Start();  // the relay lets the attempt finish
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  EXPECT_EQ(gateway_.Finishes()[0].outcome(), v1::OUTCOME_PREEMPTED);
  EXPECT_EQ(gateway_.Finishes()[0].exit_code(), 128 + SIGKILL);
}

// Heartbeats until the coordinator has been told that run `run_id` reached `step`.
void AwaitReportedStep(Agent& agent, FakeGateway& gateway, int64_t run_id, int64_t step) {
  while (true) {
    ASSERT_TRUE(agent.HeartbeatOnce().ok());
    const v1::HeartbeatRequest beat = gateway.LastHeartbeats(1)[0];
    if (beat.running_size() == 1 && beat.running(0).run_id() == run_id &&
        beat.running(0).progress().step() == step) {
      return;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

// Pumps the agent's relay (its loop is not running) until `n` FinishRun calls arrived.
bool PumpUntilFinishes(Agent& agent, const FakeGateway& gateway, size_t n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (gateway.Finishes().size() < n) {
    if (absl::Now() > deadline) return false;
    agent.relay().Pump();
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST_F(AgentTest, AChildWithoutStepProgressIsKilledAndItsAttemptFailed) {
  options_.stall_timeout_ms = 60'000;
  agent_ = std::make_unique<Agent>(options_, &gateway_, &launcher_, &probe_, &clock_);
  ASSERT_TRUE(agent_->Register().ok());
  gateway_.QueueAssignment(MakeAssignment(18, 1, 0));
  ASSERT_TRUE(*agent_->AcquireOnce());
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  v1::TrainerEvent progress;
  progress.mutable_progress()->set_step(1);
  child->Emit(progress);
  AwaitReportedStep(*agent_, gateway_, 18, 1);
  clock_.Advance(59'999);
  agent_->EnforceStallTimeout();
  EXPECT_TRUE(child->signals().empty());
  // A step forward restarts the timer; heartbeats alone (the child hangs) do not.
  progress.mutable_progress()->set_step(2);
  child->Emit(progress);
  AwaitReportedStep(*agent_, gateway_, 18, 2);
  clock_.Advance(59'999);
  agent_->EnforceStallTimeout();
  EXPECT_TRUE(child->signals().empty());
  child->Emit(progress);  // the same step again is no progress
  ASSERT_TRUE(agent_->HeartbeatOnce().ok());
  clock_.Advance(1);
  agent_->EnforceStallTimeout();
  EXPECT_THAT(child->signals(), ElementsAre(SIGKILL));  // no grace: it is hung
  ASSERT_TRUE(PumpUntilFinishes(*agent_, gateway_, 1));
  const v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_FAILED);  // the coordinator retries it
  EXPECT_EQ(finish.exit_code(), 128 + SIGKILL);
  EXPECT_THAT(finish.error(), HasSubstr("no step progress for 60 s"));
}

TEST_F(AgentTest, AbandonedReportsAreKeptAndTheNextStartDeliversThem) {
  agent_ = std::make_unique<Agent>(options_, &gateway_, &launcher_, &probe_, &clock_);
  ASSERT_TRUE(agent_->Register().ok());
  gateway_.QueueAssignment(MakeAssignment(19, 1, 0));
  ASSERT_TRUE(*agent_->AcquireOnce());
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  for (int step = 1; step <= 3; ++step) child->EmitMetric(step, "train/loss", 1.0 / step);
  WaitUntil([&] { return agent_->relay().last_seq({19, 1}) >= 3; });
  child->EmitCheckpoint(3, "/ckpt/step-3.pt");
  child->Exit(0);
  // Nothing pumps the relay: everything is undelivered when the worker gives up on it.
  agent_->Abandon();
  WaitUntil([&] { return agent_->running_attempts() == 0; });
  agent_.reset();
  EXPECT_TRUE(gateway_.Points({19, 1}).empty());
  EXPECT_TRUE(gateway_.Finishes().empty());
  EXPECT_TRUE(ReadFile(dir_ + "/spill/run-19-a1.spill").ok());
  EXPECT_TRUE(ReadFile(dir_ + "/spill/run-19-a1.outcome").ok());

  // The next start on the same folder delivers it, the FinishRun last, and lists the attempt
  // in its heartbeats until then.
  StartAgent();
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  EXPECT_EQ(gateway_.Points({19, 1}).size(), 3u);
  ASSERT_EQ(gateway_.Checkpoints().size(), 1u);
  EXPECT_EQ(gateway_.Checkpoints()[0].path(), "/ckpt/step-3.pt");
  const v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_SUCCEEDED);
  EXPECT_EQ(finish.last_acked_seq(), 3);
  EXPECT_EQ(finish.last_seq(), 3);
  EXPECT_EQ(finish.worker_id(), FakeGateway::kWorkerId);
  WaitUntil([&] { return !ReadFile(dir_ + "/spill/run-19-a1.outcome").ok(); });
  EXPECT_FALSE(ReadFile(dir_ + "/spill/run-19-a1.spill").ok());
}

// A kept attempt holds its lease only while the coordinator does something with its reports:
// one whose every report is answered with an error for more than 3 lease TTLs leaves the
// heartbeats, so the coordinator can end it as lost (an outage of the coordinator does not
// count, metric_relay_test.cc).
TEST_F(AgentTest, AKeptAttemptWhoseReportsOnlyGetErrorsLeavesTheHeartbeats) {
  const AttemptKey kept{40, 1};
  {
    MetricRelayOptions relay_options;
    relay_options.spill_dir = dir_ + "/spill";
    MetricRelay relay(&gateway_, &clock_, relay_options);
    relay.Open(kept);
    v1::MetricPoint point;
    point.set_step(1);
    point.set_name("train/loss");
    relay.AddMetric(kept, point);
    v1::FinishRunRequest finish;
    finish.set_outcome(v1::OUTCOME_PREEMPTED);
    relay.Finish(kept, finish);
    ASSERT_EQ(relay.Keep(), 1);
  }
  agent_ = std::make_unique<Agent>(options_, &gateway_, &launcher_, &probe_, &clock_);
  ASSERT_TRUE(agent_->Register().ok());  // lease TTL 1000 ms
  auto listed = [&] {
    EXPECT_TRUE(agent_->HeartbeatOnce().ok());
    return gateway_.LastHeartbeats(1)[0].running_size() == 1;
  };
  EXPECT_TRUE(listed());
  gateway_.FailNextMetricCalls(1'000'000, absl::StatusCode::kInternal);
  agent_->relay().Pump();
  clock_.Advance(3000);
  agent_->relay().Pump();
  EXPECT_TRUE(listed());
  clock_.Advance(1);
  EXPECT_FALSE(listed());
  // The coordinator ends it as lost; the relay's next report learns so and closes it.
  gateway_.FailNextMetricCalls(0);
  gateway_.MarkStale(kept);
  clock_.Advance(10'000);
  ASSERT_TRUE(PumpUntilFinishes(*agent_, gateway_, 1));
  EXPECT_TRUE(agent_->relay().open_attempts().empty());
}

TEST_F(AgentTest, AChildWhoseMetricsAreRefusedIsKilledAndItsAttemptFailed) {
  launcher_.set_on_start([](FakeChild& child) { child.set_on_signal(CheckpointOnTerm); });
  StartAgent();
  gateway_.FailNextMetricCalls(1, absl::StatusCode::kInvalidArgument);
  gateway_.QueueAssignment(MakeAssignment(41, 1, 0));
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  child->EmitMetric(1, "train/loss", 4.0);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  // SIGKILL: nothing it writes from now on could be recorded.
  EXPECT_THAT(child->signals(), ElementsAre(SIGKILL));
  const v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_FAILED);  // the coordinator retries it
  EXPECT_THAT(finish.error(), HasSubstr("refused metric points 1..1 for good"));
  EXPECT_THAT(finish.error(), ::testing::Not(HasSubstr("; the coordinator refused")));
  EXPECT_EQ(finish.last_seq(), 1);
  EXPECT_EQ(finish.last_acked_seq(), 0);
  EXPECT_TRUE(gateway_.Checkpoints().empty());
}

TEST_F(AgentTest, AMetricWithANameTooLongIsDroppedAndTheRunStillSucceeds) {
  StartAgent();
  gateway_.QueueAssignment(MakeAssignment(42, 1, 0));
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  child->EmitMetric(1, std::string(kMaxMetricNameBytes + 1, 'x'), 1.0);
  child->EmitMetric(1, "train/loss", 4.0);
  child->Exit(0);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  const v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_SUCCEEDED);
  EXPECT_EQ(finish.last_seq(), 1);
  ASSERT_EQ(gateway_.Points({42, 1}).size(), 1u);
  EXPECT_EQ(gateway_.Points({42, 1})[0].name(), "train/loss");
}

TEST_F(AgentTest, HeartbeatsListRunningAttemptsWithProgress) {
  agent_ = std::make_unique<Agent>(options_, &gateway_, &launcher_, &probe_, &clock_);
  ASSERT_TRUE(agent_->Register().ok());
  gateway_.QueueAssignment(MakeAssignment(17, 3, 0));
  ASSERT_TRUE(*agent_->AcquireOnce());
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  v1::TrainerEvent progress;
  progress.mutable_progress()->set_step(4);
  progress.mutable_progress()->set_train_loss(2.5);
  child->Emit(progress);
  child->EmitMetric(4, "train/loss", 2.5);  // read after the progress event
  while (agent_->relay().last_seq({17, 3}) < 1) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_TRUE(agent_->HeartbeatOnce().ok());
  v1::HeartbeatRequest heartbeat = gateway_.LastHeartbeats(1)[0];
  EXPECT_EQ(heartbeat.worker_id(), FakeGateway::kWorkerId);
  ASSERT_EQ(heartbeat.running_size(), 1);
  EXPECT_EQ(heartbeat.running(0).run_id(), 17);
  EXPECT_EQ(heartbeat.running(0).attempt(), 3);
  EXPECT_EQ(heartbeat.running(0).progress().step(), 4);
  EXPECT_EQ(heartbeat.running(0).progress().train_loss(), 2.5);
}

TEST_F(AgentTest, ReregistersWhenTheCoordinatorAsks) {
  agent_ = std::make_unique<Agent>(options_, &gateway_, &launcher_, &probe_, &clock_);
  ASSERT_TRUE(agent_->Register().ok());
  gateway_.RequestReregister();
  ASSERT_TRUE(agent_->HeartbeatOnce().ok());
  EXPECT_EQ(gateway_.Registrations().size(), 2u);
  ASSERT_TRUE(agent_->HeartbeatOnce().ok());
  EXPECT_EQ(gateway_.Registrations().size(), 2u);
}

TEST_F(AgentTest, DrainPreemptsEveryChildAndStopsAcquiring) {
  launcher_.set_on_start([](FakeChild& child) { child.set_on_signal(CheckpointOnTerm); });
  StartAgent();
  gateway_.QueueAssignment(MakeAssignment(20, 1, 0));
  gateway_.QueueAssignment(MakeAssignment(21, 1, 1));
  std::shared_ptr<FakeChild> first = launcher_.WaitForChild(0);
  std::shared_ptr<FakeChild> second = launcher_.WaitForChild(1);
  ASSERT_NE(second, nullptr);
  first->EmitMetric(1, "train/loss", 4.0);
  ASSERT_TRUE(gateway_.WaitForHeartbeats(1));
  EXPECT_FALSE(gateway_.LastHeartbeats(1)[0].leaving());
  agent_->Drain();
  gateway_.QueueAssignment(MakeAssignment(22, 1, 0));  // must not be taken
  agent_->Wait();
  // Its last heartbeat says it leaves, with nothing left running.
  const v1::HeartbeatRequest last = gateway_.LastHeartbeats(1)[0];
  EXPECT_TRUE(last.leaving());
  EXPECT_EQ(last.running_size(), 0);
  EXPECT_EQ(launcher_.started(), 2u);
  auto finishes = gateway_.Finishes();
  ASSERT_EQ(finishes.size(), 2u);
  for (const auto& finish : finishes) {
    EXPECT_EQ(finish.outcome(), v1::OUTCOME_PREEMPTED);
    EXPECT_EQ(finish.exit_code(), 75);
  }
  EXPECT_EQ(gateway_.Checkpoints().size(), 2u);
  EXPECT_EQ(gateway_.Points({20, 1}).size(), 1u);
  EXPECT_EQ(agent_->running_attempts(), 0u);
}

TEST_F(AgentTest, AStaleAttemptIsKilledWithoutACheckpoint) {
  launcher_.set_on_start([](FakeChild& child) { child.set_on_signal(CheckpointOnTerm); });
  StartAgent();
  gateway_.MarkStale({23, 1});
  gateway_.QueueAssignment(MakeAssignment(23, 1, 0));
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  child->EmitMetric(1, "train/loss", 4.0);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  // Never SIGTERM: it would write one more checkpoint after another attempt took over.
  EXPECT_THAT(child->signals(), ElementsAre(SIGKILL));
  // Stale means cancelled or superseded: never PREEMPTED, which would requeue the run.
  EXPECT_EQ(gateway_.Finishes()[0].outcome(), v1::OUTCOME_CANCELLED);
  EXPECT_TRUE(gateway_.Checkpoints().empty());  // dropped with the stale buffer
}

TEST_F(AgentTest, AKillOrderKillsTheChildWithoutSigterm) {
  launcher_.set_on_start([](FakeChild& child) { child.set_on_signal(CheckpointOnTerm); });
  StartAgent();
  gateway_.QueueAssignment(MakeAssignment(24, 2, 0));
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  v1::Order order;
  order.set_run_id(24);
  order.set_attempt(2);
  order.set_action(v1::KILL);
  gateway_.QueueOrder(order);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  EXPECT_THAT(child->signals(), ElementsAre(SIGKILL));
  EXPECT_TRUE(gateway_.Checkpoints().empty());
  EXPECT_EQ(gateway_.Finishes()[0].exit_code(), 128 + SIGKILL);
}

TEST_F(AgentTest, LeaseDeadlinesFollowSuccessfulHeartbeatsAndAFailingWorkerKillsItsChild) {
  launcher_.set_on_start([](FakeChild& child) { child.set_on_signal(CheckpointOnTerm); });
  agent_ = std::make_unique<Agent>(options_, &gateway_, &launcher_, &probe_, &clock_);
  ASSERT_TRUE(agent_->Register().ok());  // lease TTL 1000 ms: deadlines are sent + 900
  v1::Assignment assignment = MakeAssignment(25, 1, 0);
  assignment.set_lease_ttl_ms(2000);  // the grant's own TTL wins: sent + 2000 - 200
  gateway_.QueueAssignment(assignment);
  ASSERT_TRUE(*agent_->AcquireOnce());
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  EXPECT_THAT(child->options().argv, ::testing::Contains(std::to_string(kStartMono + 1800)));

  clock_.Advance(1000);
  ASSERT_TRUE(agent_->HeartbeatOnce().ok());  // sent at +1000: deadline +1900
  EXPECT_THAT(child->lease_deadlines(), ElementsAre(kStartMono + 1900));

  // The coordinator becomes unreachable: nothing extends the lease any more.
  gateway_.FailNextHeartbeats(1000);
  clock_.Advance(500);
  EXPECT_FALSE(agent_->HeartbeatOnce().ok());
  agent_->EnforceLeases();
  EXPECT_TRUE(child->signals().empty());
  EXPECT_THAT(child->lease_deadlines(), ElementsAre(kStartMono + 1900));
  clock_.Advance(399);  // +1899
  agent_->EnforceLeases();
  EXPECT_TRUE(child->signals().empty());
  clock_.Advance(1);  // +1900: the lease may have lapsed at the coordinator
  agent_->EnforceLeases();
  EXPECT_THAT(child->signals(), ElementsAre(SIGKILL));  // no SIGTERM, no checkpoint

  gateway_.FailNextHeartbeats(0);
  agent_->Start();
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  const v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_PREEMPTED);  // requeued, not a failure
  EXPECT_THAT(finish.error(), HasSubstr("lease"));
  EXPECT_TRUE(gateway_.Checkpoints().empty());
}

TEST_F(AgentTest, AChildStoppedByItsLeaseIsReportedPreempted) {
  StartAgent();
  gateway_.QueueAssignment(MakeAssignment(26, 1, 0));
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  child->Exit(kExitLeaseExpired, "xmod-train: the attempt's lease lapsed\n");
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  EXPECT_EQ(gateway_.Finishes()[0].outcome(), v1::OUTCOME_PREEMPTED);
  EXPECT_EQ(gateway_.Finishes()[0].exit_code(), kExitLeaseExpired);
}

TEST_F(AgentTest, AChildStoppedBySigtermFromOutsideIsReportedPreempted) {
  // Slurm's scancel signals the job's trainers as well as the worker.
  StartAgent();
  gateway_.QueueAssignment(MakeAssignment(27, 1, 0));
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  child->EmitCheckpoint(9, "/ckpt/step-9.pt");
  child->Exit(kExitPreempted);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  EXPECT_EQ(gateway_.Finishes()[0].outcome(), v1::OUTCOME_PREEMPTED);
  EXPECT_EQ(gateway_.Finishes()[0].exit_code(), kExitPreempted);
}

// Creates `path` and its sidecar as a checkpoint on disk would be.
void TouchCheckpoint(const std::string& path) {
  ASSERT_TRUE(WriteFileAtomic(path, "weights").ok());
  ASSERT_TRUE(WriteFileAtomic(path + ".sha256", "digest").ok());
}

TEST_F(AgentTest, ResumeCandidatesGoToTheChildAndRefusalsToTheCoordinator) {
  StartAgent();
  v1::Assignment assignment = MakeAssignment(27, 3, 0);
  assignment.mutable_resume()->set_path("/c/ckpt-a2-s0000000020.pt");
  assignment.mutable_resume()->set_sha256("aa");
  assignment.mutable_resume()->set_step(20);
  assignment.mutable_resume()->set_bytes(2000);
  // Recorded without a digest (an old database): not a candidate; the others keep theirs.
  v1::ResumePoint* undigested = assignment.add_fallbacks();
  undigested->set_path("/c/ckpt-a1-s0000000015.pt");
  undigested->set_step(15);
  v1::ResumePoint* fallback = assignment.add_fallbacks();
  fallback->set_path("/c/ckpt-a1-s0000000010.pt");
  fallback->set_sha256("bb");
  fallback->set_step(10);
  fallback->set_bytes(1000);
  gateway_.QueueAssignment(assignment);
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  const std::vector<std::string>& argv = child->options().argv;
  const std::vector<std::string> tail(argv.end() - 12, argv.end());
  EXPECT_THAT(tail, ElementsAre("--resume", "/c/ckpt-a2-s0000000020.pt", "--resume_sha256", "aa",
                                "--resume_bytes", "2000", "--resume", "/c/ckpt-a1-s0000000010.pt",
                                "--resume_sha256", "bb", "--resume_bytes", "1000"));
  EXPECT_THAT(argv, ::testing::Not(::testing::Contains("/c/ckpt-a1-s0000000015.pt")));
  v1::TrainerEvent refused;
  refused.mutable_resume_rejected()->set_path("/c/ckpt-a2-s0000000020.pt");
  refused.mutable_resume_rejected()->set_reason("DATA_LOSS: checksum mismatch");
  child->Emit(refused);
  child->Exit(0);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  const std::vector<v1::ReportCheckpointRequest> reports = gateway_.Checkpoints();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].step(), 20);
  EXPECT_EQ(reports[0].sha256(), "aa");
  EXPECT_EQ(reports[0].rejected(), "DATA_LOSS: checksum mismatch");
}

TEST_F(AgentTest, OldCheckpointsAreDeletedOnlyOnceNewerOnesAreDurable) {
  StartAgent();
  const std::string r10 = dir_ + "/ckpt-a1-s0000000010.pt";
  const std::string r20 = dir_ + "/ckpt-a1-s0000000020.pt";
  const std::string c30 = dir_ + "/ckpt-a2-s0000000030.pt";
  const std::string c40 = dir_ + "/ckpt-a2-s0000000040.pt";
  for (const std::string& path : {r10, r20, c30, c40}) TouchCheckpoint(path);
  v1::Assignment assignment = MakeAssignment(28, 2, 0);
  assignment.mutable_spec()->set_checkpoint_dir(dir_);
  assignment.mutable_resume()->set_path(r20);
  assignment.mutable_resume()->set_step(20);
  assignment.add_fallbacks()->set_path(r10);
  assignment.mutable_fallbacks(0)->set_step(10);
  gateway_.QueueAssignment(assignment);
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  // Step 30's first report fails: until it is durable the coordinator still offers 20 and
  // 10. (The relay retries after a backoff on the fake clock.)
  gateway_.FailNextCheckpointCalls(1);
  child->EmitCheckpoint(30, c30);
  WaitUntil([&] { return gateway_.checkpoint_calls() == 1; });  // the failed one
  EXPECT_EQ(agent_->relay().pending_checkpoints({28, 2}), 1u);
  EXPECT_TRUE(std::filesystem::exists(r10));
  clock_.Advance(1000);
  WaitUntil([&] { return agent_->relay().pending_checkpoints({28, 2}) == 0; });
  ASSERT_EQ(gateway_.Checkpoints().size(), 1u);
  // Step 30 is durable: 10 is no longer needed, 20 is step 30's fallback.
  gateway_.FailNextCheckpointCalls(1);
  child->EmitCheckpoint(40, c40);
  WaitUntil([&] { return !std::filesystem::exists(r10 + ".sha256"); });
  WaitUntil([&] { return gateway_.checkpoint_calls() == 3; });  // step 40's failed one
  EXPECT_FALSE(std::filesystem::exists(r10));
  EXPECT_TRUE(std::filesystem::exists(r20));
  child->Exit(0);
  clock_.Advance(1000);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  // Steps 40 and 30 are the coordinator's two newest: 20 goes too.
  EXPECT_FALSE(std::filesystem::exists(r20));
  EXPECT_TRUE(std::filesystem::exists(c30));
  EXPECT_TRUE(std::filesystem::exists(c40));
}

// A worker that takes over a run deletes its old checkpoints only inside the run's folder:
// recorded paths a forged report pointed elsewhere (outside, through "..", through a symlink
// out of the folder) stay, however old.
TEST_F(AgentTest, RecordedPathsOutsideTheRunFolderAreNeverDeleted) {
  StartAgent();
  const std::string run_dir = dir_ + "/ckpt/sweep-1/run-29";
  ASSERT_TRUE(MakeDirs(run_dir).ok());
  const std::string outside = dir_ + "/precious.pt";
  const std::string dotdot = run_dir + "/../../precious-too.pt";
  const std::string linked = run_dir + "/ckpt-a1-s0000000003.pt";
  TouchCheckpoint(outside);
  TouchCheckpoint(dir_ + "/ckpt/precious-too.pt");
  TouchCheckpoint(dir_ + "/ckpt/linked-target.pt");
  std::filesystem::create_symlink(dir_ + "/ckpt/linked-target.pt", linked);
  const std::string r20 = run_dir + "/ckpt-a1-s0000000020.pt";
  const std::string c30 = run_dir + "/ckpt-a2-s0000000030.pt";
  const std::string c40 = run_dir + "/ckpt-a2-s0000000040.pt";
  for (const std::string& path : {r20, c30, c40}) TouchCheckpoint(path);
  v1::Assignment assignment = MakeAssignment(29, 2, 0);
  assignment.mutable_spec()->set_checkpoint_dir(run_dir);
  assignment.mutable_resume()->set_path(r20);
  assignment.mutable_resume()->set_step(20);
  int64_t step = 10;
  for (const std::string& path : {outside, dotdot, linked}) {
    v1::ResumePoint* forged = assignment.add_fallbacks();
    forged->set_path(path);
    forged->set_step(step--);
  }
  gateway_.QueueAssignment(assignment);
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  child->EmitCheckpoint(30, c30);
  child->EmitCheckpoint(40, c40);
  child->Exit(0);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  // Steps 40 and 30 are the two newest: 20, inside the folder, went.
  EXPECT_FALSE(std::filesystem::exists(r20));
  EXPECT_TRUE(std::filesystem::exists(c30));
  for (const std::string& kept :
       {outside, dir_ + "/ckpt/precious-too.pt", dir_ + "/ckpt/linked-target.pt"}) {
    EXPECT_TRUE(std::filesystem::exists(kept)) << kept;
    EXPECT_TRUE(std::filesystem::exists(kept + ".sha256")) << kept;
  }
}

// A run folder that is itself a symlink (the shared tree was tampered with) leads elsewhere:
// nothing is deleted through it.
TEST_F(AgentTest, NothingIsDeletedThroughARunFolderThatIsASymlink) {
  StartAgent();
  const std::string elsewhere = dir_ + "/elsewhere";
  ASSERT_TRUE(MakeDirs(elsewhere).ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/ckpt/sweep-1").ok());
  const std::string run_dir = dir_ + "/ckpt/sweep-1/run-43";
  std::filesystem::create_directory_symlink(elsewhere, run_dir);
  const std::string r10 = run_dir + "/ckpt-a1-s0000000010.pt";
  const std::string r20 = run_dir + "/ckpt-a1-s0000000020.pt";
  const std::string c30 = run_dir + "/ckpt-a2-s0000000030.pt";
  for (const std::string& path : {r10, r20, c30}) TouchCheckpoint(path);
  v1::Assignment assignment = MakeAssignment(43, 2, 0);
  assignment.mutable_spec()->set_checkpoint_dir(run_dir);
  assignment.mutable_resume()->set_path(r20);
  assignment.mutable_resume()->set_step(20);
  assignment.add_fallbacks()->set_path(r10);
  assignment.mutable_fallbacks(0)->set_step(10);
  gateway_.QueueAssignment(assignment);
  std::shared_ptr<FakeChild> child = launcher_.WaitForChild(0);
  ASSERT_NE(child, nullptr);
  child->EmitCheckpoint(30, c30);  // 10 would go if the folder were real
  child->Exit(0);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  for (const std::string& name :
       {"/ckpt-a1-s0000000010.pt", "/ckpt-a1-s0000000020.pt", "/ckpt-a2-s0000000030.pt"}) {
    EXPECT_TRUE(std::filesystem::exists(elsewhere + name)) << name;
    EXPECT_TRUE(std::filesystem::exists(elsewhere + name + ".sha256")) << name;
  }
}

// A 2-rank assignment of run `run_id` on slots 0 and 1.
v1::Assignment TwoRankAssignment(int64_t run_id) {
  v1::Assignment assignment = MakeAssignment(run_id, 1, 0);
  assignment.add_slots(1);
  assignment.mutable_spec()->mutable_training()->set_ranks(2);
  return assignment;
}

TEST_F(AgentTest, AMultiRankRunStartsOneChildPerRankAndReadsRankZero) {
  StartAgent();
  const std::string attempt_dir = dir_ + "/run-30-a1";
  ASSERT_TRUE(MakeDirs(attempt_dir).ok());
  ASSERT_TRUE(WriteFileAtomic(attempt_dir + "/rdzv", "keys of an earlier start").ok());
  v1::Assignment assignment = TwoRankAssignment(30);
  assignment.mutable_resume()->set_path("/ckpt/step-5.pt");
  assignment.mutable_resume()->set_sha256("aa");
  gateway_.QueueAssignment(assignment);
  std::shared_ptr<FakeChild> rank0 = launcher_.WaitForChild(0);
  std::shared_ptr<FakeChild> rank1 = launcher_.WaitForChild(1);
  ASSERT_NE(rank1, nullptr);

  // Each rank: its slot's cores, its rank, the same spec, lease, resume point and
  // rendezvous on loopback; events only from rank 0.
  const std::string spec_path = attempt_dir + "/spec.pb";
  const std::string rendezvous = attempt_dir + "/rdzv";
  const std::string deadline = std::to_string(kStartMono + 900);
  EXPECT_THAT(
      rank0->options().argv,
      ElementsAre("/opt/xmod/xmod-train", "--spec", spec_path, "--events_fd", "3", "--threads", "2",
                  "--lease_deadline_ms", deadline, "--lease_fd", "4", "--resume", "/ckpt/step-5.pt",
                  "--resume_sha256", "aa", "--resume_bytes", "0", "--rank", "0", "--world_size",
                  "2", "--rendezvous", rendezvous, "--dist_host", "127.0.0.1"));
  EXPECT_THAT(
      rank1->options().argv,
      ElementsAre("/opt/xmod/xmod-train", "--spec", spec_path, "--events_fd", "-1", "--threads",
                  "3", "--lease_deadline_ms", deadline, "--lease_fd", "4", "--resume",
                  "/ckpt/step-5.pt", "--resume_sha256", "aa", "--resume_bytes", "0", "--rank", "1",
                  "--world_size", "2", "--rendezvous", rendezvous, "--dist_host", "127.0.0.1"));
  EXPECT_THAT(rank1->options().env,
              ::testing::Contains(std::pair<std::string, std::string>("OMP_NUM_THREADS", "3")));
  EXPECT_EQ(rank0->options().log_path, attempt_dir + "/train.log");
  EXPECT_EQ(rank1->options().log_path, attempt_dir + "/train.rank1.log");
  EXPECT_FALSE(ReadFile(rendezvous).ok());  // the stale FileStore was removed
  EXPECT_TRUE(agent_->FreeSlots().empty());

  rank1->EmitMetric(1, "train/loss", 9.0);  // ranks > 0 write no events; never read
  rank0->EmitMetric(1, "train/loss", 4.0);
  rank0->EmitMetric(2, "train/loss", 3.0);
  rank1->Exit(0);
  rank0->Exit(0);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_SUCCEEDED);
  auto points = gateway_.Points({30, 1});
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].value(), 4.0);
  EXPECT_TRUE(rank0->signals().empty());
  EXPECT_TRUE(rank1->signals().empty());
  while (agent_->FreeSlots().size() < 2) absl::SleepFor(absl::Milliseconds(1));
}

TEST_F(AgentTest, AFailingRankKillsTheOtherRanksAndFailsTheRun) {
  StartAgent();
  gateway_.QueueAssignment(TwoRankAssignment(31));
  std::shared_ptr<FakeChild> rank0 = launcher_.WaitForChild(0);
  std::shared_ptr<FakeChild> rank1 = launcher_.WaitForChild(1);
  ASSERT_NE(rank1, nullptr);
  rank0->EmitMetric(1, "train/loss", 4.0);
  rank1->Exit(1, "step 2\nxmod-train: INTERNAL: non-finite loss\n");
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  EXPECT_THAT(rank0->signals(), ElementsAre(SIGKILL));  // it would block in a collective
  v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_FAILED);
  EXPECT_EQ(finish.exit_code(), 1);
  EXPECT_THAT(finish.error(), HasSubstr("rank 1 of 2: step 2\nxmod-train: INTERNAL: non-finite"));
  EXPECT_EQ(finish.last_acked_seq(), 1);
}

TEST_F(AgentTest, AStopOrderStopsEveryRank) {
  launcher_.set_on_start([](FakeChild& child) { child.set_on_signal(CheckpointOnTerm); });
  StartAgent();
  gateway_.QueueAssignment(TwoRankAssignment(32));
  std::shared_ptr<FakeChild> rank0 = launcher_.WaitForChild(0);
  std::shared_ptr<FakeChild> rank1 = launcher_.WaitForChild(1);
  ASSERT_NE(rank1, nullptr);
  v1::Order order;
  order.set_run_id(32);
  order.set_attempt(1);
  order.set_action(v1::STOP);
  gateway_.QueueOrder(order);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  EXPECT_THAT(rank0->signals(), ElementsAre(SIGTERM));
  EXPECT_THAT(rank1->signals(), ElementsAre(SIGTERM));  // exit 75 is no failure: no SIGKILL
  v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_CANCELLED);
  EXPECT_EQ(finish.exit_code(), 75);
  ASSERT_EQ(gateway_.Checkpoints().size(), 1u);  // rank 0's only
}

TEST_F(AgentTest, AMultiRankRunNeedsAsManyFreeSlots) {
  StartAgent();
  gateway_.QueueAssignment(MakeAssignment(33, 1, 0));
  std::shared_ptr<FakeChild> single = launcher_.WaitForChild(0);
  ASSERT_NE(single, nullptr);
  gateway_.QueueAssignment(TwoRankAssignment(34));  // only slot 1 is free
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  v1::FinishRunRequest finish = gateway_.Finishes()[0];
  EXPECT_EQ(finish.run_id(), 34);
  EXPECT_EQ(finish.outcome(), v1::OUTCOME_PREEMPTED);
  EXPECT_THAT(finish.error(), HasSubstr("needs 2 free slots, 1 are free"));
  EXPECT_EQ(launcher_.started(), 1u);
  single->Exit(0);
}

// The value after `flag` in `argv`, or "" when the flag is absent.
std::string FlagValue(const std::vector<std::string>& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

TEST_F(AgentTest, AGangPartRunsItsRanksOfTheWholeWorldAtTheGangsStore) {
  options_.advertise_host = "10.0.0.2";
  options_.rendezvous_port_first = 29500;
  options_.rendezvous_port_last = 29509;
  StartAgent();
  const v1::RegisterRequest registration = gateway_.Registrations().back();
  EXPECT_EQ(registration.advertise_host(), "10.0.0.2");
  EXPECT_EQ(registration.rendezvous_port_first(), 29500);
  EXPECT_EQ(registration.rendezvous_port_last(), 29509);
  // Member 1 of a 4-rank gang, 2 ranks per worker: global ranks 2 and 3.
  v1::Assignment part = TwoRankAssignment(35);
  part.mutable_spec()->mutable_training()->set_ranks(4);
  part.mutable_spec()->mutable_training()->set_ranks_per_worker(2);
  v1::GangPart* gang = part.mutable_gang();
  gang->set_member(1);
  gang->set_members(2);
  gang->set_rank_offset(2);
  gang->set_world_size(4);
  gang->set_rendezvous("tcp://10.0.0.1:29500");
  gang->set_host("10.0.0.2");
  gateway_.QueueAssignment(part);
  std::shared_ptr<FakeChild> first = launcher_.WaitForChild(0);
  std::shared_ptr<FakeChild> second = launcher_.WaitForChild(1);
  ASSERT_NE(second, nullptr);
  int rank = 2;
  for (const std::shared_ptr<FakeChild>& child : {first, second}) {
    const std::vector<std::string>& argv = child->options().argv;
    EXPECT_EQ(FlagValue(argv, "--rank"), std::to_string(rank++));
    EXPECT_EQ(FlagValue(argv, "--world_size"), "4");
    EXPECT_EQ(FlagValue(argv, "--rendezvous"), "tcp://10.0.0.1:29500");
    EXPECT_EQ(FlagValue(argv, "--dist_host"), "10.0.0.2");
    EXPECT_EQ(FlagValue(argv, "--events_fd"), "-1");  // only global rank 0 writes events
  }
  EXPECT_FALSE(ReadFile(dir_ + "/run-35-a1/rdzv").ok());  // no FileStore for a gang
  second->Exit(0);
  first->Exit(0);
  ASSERT_TRUE(gateway_.WaitForFinishes(1));
  EXPECT_EQ(gateway_.Finishes()[0].outcome(), v1::OUTCOME_SUCCEEDED);
}

}  // namespace
}  // namespace xmod
