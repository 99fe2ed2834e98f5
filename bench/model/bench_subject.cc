// bench_model's measurements: options resolved to a device and kernels, timed steps, peak.
#include "bench/model/bench_subject.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/train/step_graph.h"
#include "model/train/training_config.h"

namespace xmod {
namespace {

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Measures an interval: construct at its start, Stop() at its end.
class Stopwatch {
 public:
  Stopwatch() : wall_(std::chrono::steady_clock::now()), cpu_(CpuSeconds()) {}
  StepTime Stop() const {
    return {std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count(),
            CpuSeconds() - cpu_};
  }

 private:
  std::chrono::steady_clock::time_point wall_;
  double cpu_;
};

absl::StatusOr<torch::Device> ResolveDevice(const std::string& device) {
  if (device == "cpu") return torch::Device(torch::kCPU);
  if (device != "cuda" && device.rfind("cuda:", 0) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device must be cpu, cuda or cuda:N, got '", device, "'"));
  }
  if (!HasCudaBuild()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device ", device, ": this LibTorch has no CUDA (", TorchBuildSummary(), ")"));
  }
  try {
    return torch::Device(device == "cuda" ? "cuda:0" : device);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat("--device ", device, ": ", e.msg()));
  }
}

// --precision: bf16 autocasts the forward and computes in bf16.
absl::Status ResolvePrecision(const std::string& precision, BenchSetup& setup) {
  if (precision == "bf16") {
    setup.autocast = {true, torch::kBFloat16};
    setup.compute_dtype = torch::kBFloat16;
  } else if (precision != "fp32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--precision must be fp32 or bf16, got '", precision, "'"));
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT "FLAG must be LISTED, got 'VALUE'" unless `value` is one of `allowed`.
absl::Status CheckChoice(const char* flag, const std::string& value,
                         std::initializer_list<const char*> allowed, const char* listed) {
  for (const char* choice : allowed) {
    if (value == choice) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(flag, " must be ", listed, ", got '", value, "'"));
}

// --cuda_graphs on this device, and the untimed steps that leave recording out.
absl::Status ResolveGraphs(const BenchOptions& o, BenchSetup& setup) {
  absl::StatusOr<bool> graphs =
      UseStepGraphs(o.cuda_graphs, {DeviceHasGraphs(setup.device), 1, /*static_step=*/true});
  if (!graphs.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cuda_graphs ", o.cuda_graphs, ": ", graphs.status().message()));
  }
  setup.graphs = *graphs;
  setup.warmup = setup.graphs ? std::max(o.warmup, TrainStep::kWarmupSteps + 1) : o.warmup;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BenchSetup> ResolveSetup(const BenchOptions& o) {
  BenchSetup setup;
  absl::StatusOr<torch::Device> device = ResolveDevice(o.device);
  if (!device.ok()) return device.status();
  setup.device = *device;
  if (absl::Status s = ResolvePrecision(o.precision, setup); !s.ok()) return s;
  if (absl::Status s = CheckChoice("--attention", o.attention, {"auto", "fused", "manual"},
                                   "auto, fused or manual");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckChoice("--optimizer", o.optimizer, {"none", "muon", "adamw"}, "none, muon or adamw");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ResolveGraphs(o, setup); !s.ok()) return s;
  setup.runtime.fused_attention = o.attention != "manual";
  setup.runtime.activation_checkpointing = o.checkpointing;
  setup.peak_size = o.peak_size > 0 ? o.peak_size : (setup.device.is_cuda() ? 8192 : 1024);
  return setup;
}

xmod::v1::ModelSpec MakeSpec(const BenchOptions& o, bool sparse) {
  xmod::v1::ModelSpec spec;
  spec.mutable_backbone()->set_name(o.backbone);
  spec.set_arch(sparse ? xmod::v1::XMOD : xmod::v1::DENSE);
  if (sparse) {
    spec.set_k(o.k);
    spec.set_a(o.a);
    if (o.n0 >= 0) spec.set_n0(o.n0);
  }
  return spec;
}

double PeakRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
}

absl::StatusOr<std::unique_ptr<Subject>> Subject::Create(const BenchOptions& o,
                                                         const BenchSetup& setup, bool sparse) {
  absl::StatusOr<Accounting> acc = Account(MakeSpec(o, sparse), o.seq_len);
  if (!acc.ok()) return acc.status();
  return std::unique_ptr<Subject>(new Subject(o, setup, sparse, *std::move(acc)));
}

Subject::Subject(const BenchOptions& o, const BenchSetup& setup, bool sparse, Accounting acc)
    : o_(o), setup_(setup), sparse_(sparse), acc_(std::move(acc)) {
  model_ = Transformer(MakeSpec(o, sparse), acc_, o.seq_len, setup.runtime);
  model_->to(setup.device);
  model_->train();
  batch_ = std::max(1, o.tokens_per_step / o.seq_len);
  tokens_ = torch::randint(0, acc_.backbone.vocab_size, {batch_, o.seq_len + 1}, torch::kLong)
                .to(setup.device);  // (B, L + 1)
  if (o.optimizer != "none") {
    // xmod-train's update (ParameterUpdate) at the training defaults (ResolveTraining: paper
    // Table 5).
    xmod::v1::TrainingSpec training;
    training.set_optimizer(o.optimizer);
    training.set_seq_len(o.seq_len);
    training.set_batch_tokens(static_cast<int64_t>(batch_) * o.seq_len);
    training.set_flop_budget(1);
    absl::StatusOr<xmod::v1::TrainingSpec> resolved = ResolveTraining(training);
    TORCH_CHECK(resolved.ok(), resolved.status().ToString());
    update_ = std::make_unique<ParameterUpdate>(model_, *resolved, setup.autocast);
  }
  TrainStepOptions step;
  step.seq_len = o.seq_len;
  step.rows = batch_;
  step.micro_rows = batch_;
  step.autocast = setup.autocast;
  std::unique_ptr<StepGraphs> graphs;
  if (setup.graphs) {
    absl::StatusOr<std::unique_ptr<StepGraphs>> made = MakeDeviceStepGraphs(setup.device);
    TORCH_CHECK(made.ok(), made.status().ToString());
    graphs = *std::move(made);
  }
  step_ = std::make_unique<TrainStep>(model_, update_.get(), step, std::move(graphs));
}

StepTime Subject::Step() {
  SynchronizeDevice(setup_.device);
  Stopwatch watch;
  step_->ForwardBackward(tokens_);
  SynchronizeDevice(setup_.device);
  StepTime time = watch.Stop();
  if (update_ != nullptr) {
    Stopwatch update;
    step_->Update(/*multiplier=*/1.0);
    SynchronizeDevice(setup_.device);
    time.optimizer_wall = update.Stop().wall;
  }
  return time;
}

void Subject::Profile(const std::string& path) {
  torch::autograd::profiler::RecordProfile guard(path);
  Step();
}

Result Subject::Summarize(const std::vector<StepTime>& steps, int threads) const {
  Result r;
  const double tokens_per_step = static_cast<double>(batch_) * o_.seq_len;
  const double n = std::max<size_t>(1, steps.size());
  r.best_step_seconds = steps.empty() ? 0 : steps[0].wall;
  for (const StepTime& t : steps) {
    r.step_seconds += t.wall / n;
    r.step_cpu_seconds += t.cpu / n;
    r.optimizer_seconds += t.optimizer_wall / n;
    r.best_step_seconds = std::min(r.best_step_seconds, t.wall);
  }
  r.tokens_per_second = tokens_per_step / r.step_seconds;
  r.train_flops_per_token = acc_.train_flops_per_token;
  r.causal_train_flops_per_token =
      acc_.train_flops_per_token *
      (1 - 0.5 * acc_.attention_flops_per_token / acc_.forward_flops_per_token);
  r.flops_per_second = r.tokens_per_second * acc_.train_flops_per_token;
  r.peak_rss_mib = PeakRssMiB();
  r.peak_device_mib = PeakDeviceMemoryBytes(setup_.device) / (1024.0 * 1024.0);
  r.loss = step_->losses().loss.item<double>();
  r.layers = acc_.layers;
  r.threads = threads;
  return r;
}

Peak MeasurePeak(const BenchSetup& setup) {
  const int64_t n = setup.peak_size;
  auto options = torch::TensorOptions().dtype(setup.compute_dtype).device(setup.device);
  torch::Tensor a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
  torch::Tensor c = torch::matmul(a, b);
  SynchronizeDevice(setup.device);
  const int reps = setup.device.is_cuda() ? 20 : 3;
  const double flops = reps * 2.0 * n * n * n;
  Peak best;
  for (int trial = 0; trial < 10; ++trial) {
    Stopwatch watch;
    for (int i = 0; i < reps; ++i) torch::matmul_out(c, a, b);
    SynchronizeDevice(setup.device);
    const StepTime t = watch.Stop();
    best.flops_per_second = std::max(best.flops_per_second, flops / t.wall);
    best.flops_per_cpu_second = std::max(best.flops_per_cpu_second, flops / t.cpu);
  }
  return best;
}

}  // namespace xmod
