// Tests of the training step as a unit (train_step.h): no host synchronisation inside a step,
// persistent gradient buffers, and the bookkeeping of the recorded step (warm-up, one
// recording per phase, replays reading static buffers) against the eager step, on the CPU
// with stand-in recordings (test_step_graphs.h); and training.cuda_graphs' policy.
#include "model/train/train_step.h"

#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "model/accounting/accounting.h"
#include "model/device.h"
#include "model/kernel_choice.h"
#include "model/test_specs.h"
#include "model/train/test_step_graphs.h"
#include "model/train/training_config.h"

namespace xmod {
namespace {

constexpr int kSeqLen = 16;
constexpr int kRows = 4;

// The operators that make the host wait for the device, or whose output shape depends on
// tensor values (which a recorded step cannot have): reading a value (item,
// _local_scalar_dense, is_nonzero, equal), data-dependent outputs (nonzero, masked_select,
// unique, bincount, whose CUDA kernel reads the maximum on the host) and copies to host
// memory (a CUDA tensor's .cpu(), .to(kCPU) and pin_memory go through _to_copy with a CPU
// target; on a CPU they are no-ops and cannot be seen here — nonzero, bincount and item are
// what such code calls next).
const std::set<std::string>& HostSyncOps() {
  static const std::set<std::string> ops = {"aten::item",
                                            "aten::_local_scalar_dense",
                                            "aten::is_nonzero",
                                            "aten::equal",
                                            "aten::allclose",
                                            "aten::nonzero",
                                            "aten::nonzero_numpy",
                                            "aten::argwhere",
                                            "aten::masked_select",
                                            "aten::unique_dim",
                                            "aten::_unique",
                                            "aten::_unique2",
                                            "aten::unique_consecutive",
                                            "aten::bincount",
                                            "aten::repeat_interleave",
                                            "aten::histc",
                                            "aten::_assert_async"};
  return ops;
}

// Counts the operators run on every thread between construction and destruction, through a
// RecordFunction callback (the hook LibTorch's profiler is built on).
class OpRecorder {
 public:
  OpRecorder() {
    std::lock_guard<std::mutex> lock(mu_);
    counts_.clear();
    handle_ = at::addGlobalCallback(
        at::RecordFunctionCallback(&OnStart).scopes({at::RecordScope::FUNCTION}));
  }
  ~OpRecorder() { at::removeCallback(handle_); }

  // The host-synchronising operators seen, with their counts.
  std::map<std::string, int> HostSyncs() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, int> out;
    for (const auto& [name, n] : counts_) {
      if (HostSyncOps().count(name) > 0) out[name] = n;
    }
    return out;
  }
  int Total() const {
    std::lock_guard<std::mutex> lock(mu_);
    int total = 0;
    for (const auto& [name, n] : counts_) total += n;
    return total;
  }

 private:
  static std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[fn.name()];
    return nullptr;
  }
  static inline std::mutex mu_;
  static inline std::map<std::string, int> counts_;
  at::CallbackHandle handle_;
};

std::string Describe(const std::map<std::string, int>& ops) {
  std::string out;
  for (const auto& [name, n] : ops) out += name + " x" + std::to_string(n) + " ";
  return out;
}

xmod::v1::TrainingSpec Training() {
  xmod::v1::TrainingSpec training;
  training.set_seq_len(kSeqLen);
  training.set_batch_tokens(kRows * kSeqLen);
  training.set_flop_budget(1);
  training.set_lr(0.02);
  training.set_adamw_lr(0.01);
  absl::StatusOr<xmod::v1::TrainingSpec> resolved = ResolveTraining(training);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

// A tiny model of `arch` with its update and step; graphs as given.
struct Subject {
  Transformer model{nullptr};
  std::unique_ptr<ParameterUpdate> update;
  std::unique_ptr<TrainStep> step;
};
Subject Make(xmod::v1::Architecture arch, std::unique_ptr<StepGraphs> graphs = nullptr,
             int64_t micro_rows = kRows, torch::Device device = torch::kCPU,
             AutocastState autocast = {}) {
  const xmod::v1::ModelSpec spec = TinySpec(arch, /*k=*/2, /*a=*/1);
  absl::StatusOr<Accounting> acc = Account(spec, kSeqLen);
  EXPECT_TRUE(acc.ok()) << acc.status();
  torch::manual_seed(7);
  Subject s;
  s.model = Transformer(spec, *acc, kSeqLen);
  s.model->to(device);
  s.model->train();
  s.update = std::make_unique<ParameterUpdate>(s.model, Training(), autocast);
  TrainStepOptions options;
  options.seq_len = kSeqLen;
  options.rows = kRows;
  options.micro_rows = micro_rows;
  options.autocast = autocast;
  s.step = std::make_unique<TrainStep>(s.model, s.update.get(), options, std::move(graphs));
  return s;
}

// Step `i`'s windows (kRows, kSeqLen + 1), the same in every subject.
torch::Tensor Batch(int i) {
  torch::manual_seed(100 + i);
  return torch::randint(0, 256, {kRows, kSeqLen + 1}, torch::kInt64);
}

class HostSyncTest : public ::testing::TestWithParam<xmod::v1::Architecture> {};

// A step that does not log reads nothing back: forward, backward, clipping and the update of
// Dense, X-MoD and MoD run no operator that waits for the device or sizes a tensor by its
// values, so a GPU runs the step without the host waiting, and it can be recorded. Checked on
// the path a GPU takes, ATen's composite formulas (kernel_choice.h; the CPU's own kernels may
// read host memory, which on a CPU waits for nothing), with and without micro-batches.
TEST_P(HostSyncTest, StepsRunNoHostSynchronisingOperator) {
  ScopedCompositeKernels gpu_path;
  for (int64_t micro_rows : {int64_t{kRows}, int64_t{2}}) {
    Subject s = Make(GetParam(), nullptr, micro_rows);
    ASSERT_TRUE(s.step->Run(Batch(0), 1.0).ok());  // first-step set-up is not what a step does
    OpRecorder recorder;
    for (int i = 1; i <= 2; ++i) ASSERT_TRUE(s.step->Run(Batch(i), 0.5).ok());
    EXPECT_GT(recorder.Total(), 100) << "the recorder saw the step";
    EXPECT_TRUE(recorder.HostSyncs().empty())
        << "micro_rows " << micro_rows << ": " << Describe(recorder.HostSyncs());
  }
}

INSTANTIATE_TEST_SUITE_P(StaticArchitectures, HostSyncTest,
                         ::testing::Values(xmod::v1::DENSE, xmod::v1::XMOD, xmod::v1::MOD));

// The check sees what it looks for: MoE's step counts its experts' rows with bincount (a host
// read on CUDA) and reads them on the host, which is why its step is not recorded; the
// threshold rule of evaluation reads its longest selection with item().
TEST(HostSyncTest, CatchesMoEsExpertCountsAndTheThresholdRule) {
  Subject moe = Make(xmod::v1::MOE);
  ASSERT_TRUE(moe.step->Run(Batch(0), 1.0).ok());
  {
    OpRecorder recorder;
    ASSERT_TRUE(moe.step->Run(Batch(1), 1.0).ok());
    EXPECT_GT(recorder.HostSyncs().count("aten::bincount"), 0u) << Describe(recorder.HostSyncs());
  }
  Subject xmod = Make(xmod::v1::XMOD);
  torch::NoGradGuard no_grad;
  torch::Tensor batch = Batch(2);
  OpRecorder recorder;
  xmod.model->forward(batch.narrow(1, 0, kSeqLen), batch.narrow(1, 1, kSeqLen),
                      RoutingMode::kThreshold);
  EXPECT_GT(recorder.HostSyncs().count("aten::_local_scalar_dense"), 0u)
      << Describe(recorder.HostSyncs());
}

// With graphs, gradients live in buffers allocated once, zeroed in place at every step: the
// same storage step after step, holding one step's gradient, not the sum of several.
TEST(TrainStepTest, RecordedStepsKeepGradientsInPersistentBuffersOfOneStep) {
  Subject s = Make(xmod::v1::XMOD, std::make_unique<ClosureStepGraphs>());
  const std::vector<torch::Tensor> params = s.model->parameters();
  std::vector<const void*> storage;
  for (const torch::Tensor& p : params) {
    ASSERT_TRUE(p.grad().defined());
    storage.push_back(p.grad().data_ptr());
  }
  s.step->ForwardBackward(Batch(0));
  std::vector<torch::Tensor> first;
  for (const torch::Tensor& p : params) first.push_back(p.grad().clone());
  s.step->ForwardBackward(Batch(0));  // the same batch at the same weights
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].grad().data_ptr(), storage[i]) << "parameter " << i;
    EXPECT_TRUE(torch::equal(params[i].grad(), first[i])) << "parameter " << i;
  }
  EXPECT_GT(first[0].abs().sum().item<double>(), 0);
}

// An eager step holds no gradient before it starts or after its update: autograd's own
// buffers, released once they are applied.
TEST(TrainStepTest, EagerStepsReleaseTheirGradientsAfterTheUpdate) {
  Subject s = Make(xmod::v1::XMOD);
  for (const torch::Tensor& p : s.model->parameters()) EXPECT_FALSE(p.grad().defined());
  s.step->ForwardBackward(Batch(0));
  EXPECT_TRUE(s.model->parameters()[0].grad().defined());
  s.step->Update(1.0);
  for (const torch::Tensor& p : s.model->parameters()) EXPECT_FALSE(p.grad().defined());
}

// With graphs, each phase runs eagerly kWarmupSteps times, is recorded once (not run), and
// replays at that step and every later one, reading the batch, the update's numbers and the
// losses from buffers whose addresses never change; the losses and weights follow the eager
// step's to float32 rounding (Muon's update differs in its last bits; the rest is the same
// arithmetic).
TEST(TrainStepTest, RecordedStepReplaysWhatTheEagerStepComputes) {
  constexpr int kSteps = 6;
  for (auto arch : {xmod::v1::DENSE, xmod::v1::XMOD}) {
    ReplayCounts counts;
    Subject graphed = Make(arch, std::make_unique<ClosureStepGraphs>(&counts), /*micro_rows=*/2);
    Subject eager_micro = Make(arch, nullptr, /*micro_rows=*/2);
    const void* loss_storage = graphed.step->losses().loss.data_ptr();
    for (int i = 0; i < kSteps; ++i) {
      const double multiplier = 1.0 - 0.1 * i;
      absl::StatusOr<StepLosses> want = eager_micro.step->Run(Batch(i), multiplier);
      absl::StatusOr<StepLosses> got = graphed.step->Run(Batch(i), multiplier);
      ASSERT_TRUE(want.ok() && got.ok());
      EXPECT_EQ(got->loss.data_ptr(), loss_storage);
      const double w = want->loss.item<double>(), g = got->loss.item<double>();
      EXPECT_NEAR(g, w, 1e-5 * std::abs(w)) << "arch " << arch << " step " << i;
      EXPECT_NEAR(got->aux.item<double>(), want->aux.item<double>(), 1e-5) << "step " << i;
    }
    EXPECT_EQ(counts.runs, 2 * TrainStep::kWarmupSteps);
    EXPECT_EQ(counts.captures, 2);
    EXPECT_EQ(counts.replays, 2 * (kSteps - TrainStep::kWarmupSteps));
    EXPECT_EQ(graphed.step->recordings(), 2);
    const std::vector<torch::Tensor> got = graphed.model->parameters(),
                                     want = eager_micro.model->parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(torch::allclose(got[i], want[i], /*rtol=*/1e-4, /*atol=*/1e-5))
          << "parameter " << i << ": max diff " << (got[i] - want[i]).abs().max().item<double>();
    }
  }
}

// On a GPU, with the device's own graphs (CUDA graphs): the recorded step's losses follow the
// eager step's within bfloat16's tolerance over steps that include the warm-up, the recording
// and replays, under bf16 autocast and with gradient accumulation. Skips without a GPU.
TEST(TrainStepTest, CudaGraphsFollowTheEagerStepOnTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  const torch::Device cuda(torch::kCUDA, 0);
  ASSERT_TRUE(DeviceHasGraphs(cuda));
  constexpr int kSteps = 6;
  for (auto arch : {xmod::v1::DENSE, xmod::v1::XMOD, xmod::v1::MOD}) {
    absl::StatusOr<std::unique_ptr<StepGraphs>> graphs = MakeDeviceStepGraphs(cuda);
    ASSERT_TRUE(graphs.ok()) << graphs.status();
    const AutocastState bf16{true, torch::kBFloat16};
    Subject graphed = Make(arch, *std::move(graphs), /*micro_rows=*/2, cuda, bf16);
    Subject eager = Make(arch, nullptr, /*micro_rows=*/2, cuda, bf16);
    for (int i = 0; i < kSteps; ++i) {
      absl::StatusOr<StepLosses> want = eager.step->Run(Batch(i).to(cuda), 1.0 - 0.1 * i);
      absl::StatusOr<StepLosses> got = graphed.step->Run(Batch(i).to(cuda), 1.0 - 0.1 * i);
      ASSERT_TRUE(want.ok() && got.ok());
      const double w = want->loss.item<double>(), g = got->loss.item<double>();
      EXPECT_TRUE(std::isfinite(g)) << "arch " << arch << " step " << i;
      EXPECT_NEAR(g, w, 0.02 * std::abs(w)) << "arch " << arch << " step " << i;
    }
    EXPECT_EQ(graphed.step->recordings(), 2);
    EXPECT_EQ(graphed.step->replays(), 2 * (kSteps - TrainStep::kWarmupSteps));
  }
}

// training.cuda_graphs: "off" never records; "on" records or names the condition that fails;
// "auto" is kStepGraphsByDefault where every condition holds.
TEST(StepGraphPolicyTest, OnNamesWhatIsMissing) {
  const StepGraphConditions ok{true, 1, true};
  EXPECT_FALSE(*UseStepGraphs("off", ok));
  EXPECT_TRUE(*UseStepGraphs("on", ok));
  EXPECT_EQ(*UseStepGraphs("auto", ok), kStepGraphsByDefault);
  const std::vector<std::pair<StepGraphConditions, std::string>> failing = {
      {{false, 1, true}, "CUDA device"}, {{true, 2, true}, "one rank"}, {{true, 1, false}, "MoE"}};
  for (const auto& [conditions, why] : failing) {
    absl::StatusOr<bool> on = UseStepGraphs("on", conditions);
    EXPECT_EQ(on.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(on.status().message().find("training.cuda_graphs"), std::string::npos);
    EXPECT_NE(on.status().message().find(why), std::string::npos) << on.status();
    EXPECT_FALSE(*UseStepGraphs("auto", conditions));
    EXPECT_FALSE(*UseStepGraphs("off", conditions));
  }
  EXPECT_FALSE(DeviceHasGraphs(torch::kCPU));
  // The CUDA build (libc10_cuda loaded, XMOD_CUDA compiled) records on CUDA, GPU or not.
  EXPECT_EQ(DeviceHasGraphs(torch::Device(torch::kCUDA, 0)), HasCudaBuild()) << TorchBuildSummary();
  EXPECT_FALSE(MakeDeviceStepGraphs(torch::kCPU).ok());
}

}  // namespace
}  // namespace xmod
