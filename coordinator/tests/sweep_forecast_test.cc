// Forecasts of a dry-run submission (coordinator/api/sweep_forecast.h): the pure forecast from
// measured speeds, and through a real coordinator, the speed its finished runs reached.
#include "coordinator/api/sweep_forecast.h"

#include <memory>
#include <string>
#include <vector>

#include "coordinator/coordinator.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

xmod::v1::Run PlannedRun(const std::string& name, xmod::v1::Architecture arch, int k, int seq_len,
                         int ranks = 0) {
  xmod::v1::Run run;
  run.set_name(name);
  xmod::v1::RunSpec* spec = run.mutable_spec();
  spec->mutable_model()->mutable_backbone()->set_name("tiny-test");
  spec->mutable_model()->set_arch(arch);
  if (k > 0) spec->mutable_model()->set_k(k);
  spec->mutable_training()->set_seq_len(seq_len);
  spec->mutable_training()->set_precision("fp32");
  spec->mutable_training()->set_flop_budget(3.6e12);
  spec->mutable_training()->set_ranks(ranks);
  run.set_forward_flops_per_token(1e6);  // 3e6 training FLOPs a token: 1.2e6 tokens
  return run;
}

ThroughputSample Measured(const xmod::v1::Run& like, double tokens_per_second,
                          const std::string& kind, int ranks = 0) {
  ThroughputSample sample;
  sample.spec = like.spec();
  sample.spec.mutable_training()->set_ranks(ranks);
  sample.tokens_per_second = tokens_per_second;
  sample.slot_kind = kind;
  return sample;
}

TEST(SweepForecastTest, TheSameModelFirstThenItsBackboneAndArchitecture) {
  const xmod::v1::Run dense = PlannedRun("dense", xmod::v1::DENSE, 0, 64);
  const xmod::v1::Run k4 = PlannedRun("k4", xmod::v1::XMOD, 4, 64);
  const xmod::v1::Run k8 = PlannedRun("k8", xmod::v1::XMOD, 8, 64);  // only K4 measured
  const xmod::v1::Run long_context = PlannedRun("l128", xmod::v1::DENSE, 0, 128);
  const std::vector<ThroughputSample> measured = {
      Measured(dense, 100, "cpu"), Measured(dense, 300, "cpu"), Measured(dense, 200, "cpu"),
      Measured(k4, 50, "cpu")};
  SlotCounts slots;
  slots.cpu = 2;
  const xmod::v1::SweepForecast f = ForecastSweep({dense, k4, k8, long_context}, measured, slots);
  ASSERT_EQ(f.runs_size(), 4);
  EXPECT_DOUBLE_EQ(f.runs(0).tokens(), 1.2e6);
  EXPECT_DOUBLE_EQ(f.runs(0).tokens_per_second(), 200);  // the median of three
  EXPECT_EQ(f.runs(0).device(), "cpu");
  EXPECT_DOUBLE_EQ(f.runs(0).slot_hours(), 1.2e6 / 200 / 3600);
  EXPECT_EQ(f.runs(0).source(),
            "median of 3 finished runs of the same model, tiny-test DENSE, L 64, fp32 on cpu");
  EXPECT_DOUBLE_EQ(f.runs(2).tokens_per_second(), 50);
  EXPECT_EQ(f.runs(2).source(),
            "median of 1 finished run of tiny-test XMOD, L 64, fp32 on cpu (other model options)");
  EXPECT_EQ(f.runs(3).device(), "");
  EXPECT_EQ(f.runs(3).source(), "no finished run of tiny-test DENSE, L 128, fp32 to go by");
  EXPECT_EQ(f.unmeasured_runs(), 1);
  EXPECT_DOUBLE_EQ(f.cpu_slot_hours(), (1.2e6 / 200 + 2 * 1.2e6 / 50) / 3600);
  EXPECT_EQ(f.gpu_hours(), 0);
  // Two CPU slots: half the slot-hours, but no sooner than its longest run (K4 and K8, 24,000 s).
  EXPECT_DOUBLE_EQ(f.wall_seconds(), (1.2e6 / 200 + 2 * 1.2e6 / 50) / 2);
}

TEST(SweepForecastTest, CudaMeasurementsComeFirstAndRanksScaleTheRate) {
  const xmod::v1::Run one = PlannedRun("one", xmod::v1::DENSE, 0, 64);
  const xmod::v1::Run four = PlannedRun("four", xmod::v1::DENSE, 0, 64, /*ranks=*/4);
  // A 2-rank GPU run at 20,000 tokens/s: 10,000 per rank.
  const std::vector<ThroughputSample> measured = {Measured(one, 500, "cpu"),
                                                  Measured(one, 20000, "cuda", /*ranks=*/2)};
  const xmod::v1::SweepForecast f = ForecastSweep({one, four}, measured, SlotCounts{});
  EXPECT_EQ(f.runs(0).device(), "cuda");
  EXPECT_DOUBLE_EQ(f.runs(0).tokens_per_second(), 10000);
  EXPECT_DOUBLE_EQ(f.runs(1).tokens_per_second(), 40000);
  // GPU-hours are the same whatever the ranks: 1.2e6 tokens at 10,000 a GPU-second.
  EXPECT_DOUBLE_EQ(f.runs(1).slot_hours(), 1.2e6 / 10000 / 3600);
  EXPECT_DOUBLE_EQ(f.gpu_hours(), 2 * 1.2e6 / 10000 / 3600);
  EXPECT_EQ(f.wall_seconds(), 0);  // no GPU slot heard from: unknown
}

// A coordinator whose one CPU worker finished TinySweep's runs at 2,000 tokens/s forecasts a
// second dry-run submission from that speed, and says where it has nothing to go by.
TEST(SweepForecastServiceTest, ADryRunForecastsFromTheSpeedFinishedRunsReached) {
  const std::string dir = NewTestDir("forecast");
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator =
      Coordinator::Start(LoopbackOptions(dir));
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*coordinator)->ports().grpc),
                                     grpc::InsecureChannelCredentials());
  auto user = xmod::v1::Coordinator::NewStub(channel);
  auto worker = xmod::v1::WorkerGateway::NewStub(channel);
  auto context = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return c;
  };
  xmod::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = TinySweep(dir);
  xmod::v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(user->SubmitSweep(context().get(), submit, &submitted).ok());

  xmod::v1::RegisterRequest reg;
  reg.set_worker_name("w1");
  xmod::v1::Slot* slot = reg.add_slots();
  slot->set_kind(xmod::v1::CPU);
  slot->set_cores(1);
  xmod::v1::RegisterResponse registered;
  ASSERT_TRUE(worker->Register(context().get(), reg, &registered).ok());
  for (int i = 0; i < submitted.runs_size(); ++i) {
    xmod::v1::AcquireRunRequest acquire;
    acquire.set_worker_id(registered.worker_id());
    acquire.add_free_slots(0);
    acquire.set_wait_ms(5000);
    xmod::v1::AcquireRunResponse assignment;
    ASSERT_TRUE(worker->AcquireRun(context().get(), acquire, &assignment).ok());
    ASSERT_TRUE(assignment.has_assignment());
    xmod::v1::HeartbeatRequest beat;
    beat.set_worker_id(registered.worker_id());
    xmod::v1::RunningAttempt* running = beat.add_running();
    running->set_run_id(assignment.assignment().run_id());
    running->set_attempt(1);
    running->mutable_progress()->set_step(1);
    running->mutable_progress()->set_tokens_per_second(2000);
    xmod::v1::HeartbeatResponse beaten;
    ASSERT_TRUE(worker->Heartbeat(context().get(), beat, &beaten).ok());
    xmod::v1::FinishRunRequest finish;
    finish.set_worker_id(registered.worker_id());
    finish.set_run_id(assignment.assignment().run_id());
    finish.set_attempt(1);
    finish.set_outcome(xmod::v1::OUTCOME_SUCCEEDED);
    xmod::v1::FinishRunResponse finished;
    ASSERT_TRUE(worker->FinishRun(context().get(), finish, &finished).ok());
  }

  // The same sweep at twice the budget, and one context more that nothing finished at.
  xmod::v1::SweepSpec next = TinySweep(dir);
  next.set_name("next");
  next.mutable_training()->set_flop_budget(2 * next.training().flop_budget());
  next.mutable_grids(0)->add_seq_lens(64);
  next.mutable_grids(0)->add_seq_lens(128);
  submit.Clear();
  *submit.mutable_spec() = next;
  submit.set_dry_run(true);
  submitted.Clear();
  ASSERT_TRUE(user->SubmitSweep(context().get(), submit, &submitted).ok());
  const xmod::v1::SweepForecast& f = submitted.forecast();
  ASSERT_EQ(f.runs_size(), submitted.runs_size());
  int measured = 0;
  for (int i = 0; i < f.runs_size(); ++i) {
    const xmod::v1::Run& run = submitted.runs(i);
    const xmod::v1::RunForecast& r = f.runs(i);
    EXPECT_EQ(r.name(), run.name());
    if (run.spec().training().seq_len() == 128) {
      EXPECT_EQ(r.tokens_per_second(), 0) << r.name();
      EXPECT_THAT(r.source(), HasSubstr("no finished run of tiny-test")) << r.name();
      continue;
    }
    ++measured;
    EXPECT_DOUBLE_EQ(r.tokens_per_second(), 2000) << r.name();
    EXPECT_EQ(r.device(), "cpu");
    EXPECT_THAT(r.source(), HasSubstr("median of 1 finished run of the same model"));
    EXPECT_DOUBLE_EQ(r.slot_hours(), r.tokens() / 2000 / 3600) << r.name();
  }
  EXPECT_EQ(measured, 3);
  EXPECT_EQ(f.unmeasured_runs(), f.runs_size() - 3);
  EXPECT_EQ(f.cpu_slots(), 1);
  EXPECT_EQ(f.gpu_slots(), 0);
  EXPECT_GT(f.cpu_slot_hours(), 0);
  EXPECT_DOUBLE_EQ(f.wall_seconds(), f.cpu_slot_hours() * 3600);
  // Nothing was stored by the dry run.
  xmod::v1::ListSweepsResponse sweeps;
  ASSERT_TRUE(user->ListSweeps(context().get(), {}, &sweeps).ok());
  EXPECT_EQ(sweeps.sweeps_size(), 1);
  (*coordinator)->Shutdown();
}

}  // namespace
}  // namespace xmod
