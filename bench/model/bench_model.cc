// bench_model: training-step time (forward + backward) of X-MoD against Dense at CPU sizes
// (issue 3 "Performance"): tokens/s, achieved FLOP/s (the accounting's training FLOPs per
// token, paper B.1) against this machine's measured matrix-product peak, peak RSS, and the
// efficiency ratio (t_xmod / t_dense) / (phi / phi_D), which must be <= 1.0 when the sparse
// layers really skip the work.
//
// Each measurement runs in a forked child so that its peak RSS is its own. Thread budget:
// --threads sets torch's intra-op threads; set OPENBLAS_NUM_THREADS / OMP_NUM_THREADS to the
// same value in the environment (run_bench.sh does).
//
// Output: one line per model, "key=value" pairs, then the ratio line.
#include <sys/resource.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "model/accounting/accounting.h"
#include "model/transformer.h"

namespace xmod {
namespace {

struct BenchOptions {
  std::string backbone = "cpu-d256";  // d = 256, 8 active layers, 8 heads, 4 KV heads
  int seq_len = 1024;
  int tokens_per_step = 4096;
  int k = 4;
  double a = 1;
  int n0 = -1;  // X-MoD dense prefix; -1 = the default (4)
  int threads = 1;
  int warmup = 1;
  int steps = 3;
  std::string arch = "both";  // dense | xmod | both | plan
  std::string profile;        // when set: one extra profiled step, chrome trace to this path
};

struct Result {
  double step_seconds = 0;
  double tokens_per_second = 0;
  double flops_per_second = 0;
  double train_flops_per_token = 0;
  double peak_rss_mib = 0;
  double loss = 0;
  int layers = 0;
};

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

Result Measure(const BenchOptions& o, bool sparse) {
  torch::set_num_threads(o.threads);
  torch::manual_seed(0);
  xmod::v1::ModelSpec spec = MakeSpec(o, sparse);
  absl::StatusOr<Accounting> acc = Account(spec, o.seq_len);
  if (!acc.ok()) {
    std::fprintf(stderr, "%s\n", acc.status().ToString().c_str());
    std::exit(2);
  }
  Transformer model(spec, *acc, o.seq_len);
  model->train();
  const int64_t batch = std::max(1, o.tokens_per_step / o.seq_len);
  torch::Tensor tokens =
      torch::randint(0, acc->backbone.vocab_size, {batch, o.seq_len + 1}, torch::kLong);
  torch::Tensor input = tokens.narrow(1, 0, o.seq_len).contiguous();
  torch::Tensor target = tokens.narrow(1, 1, o.seq_len).contiguous();
  Result r;
  double total = 0;
  for (int step = 0; step < o.warmup + o.steps; ++step) {
    model->zero_grad();
    auto start = std::chrono::steady_clock::now();
    ModelOutput out = model->forward(input, target, RoutingMode::kTopK);
    (out.loss + out.aux_loss).backward();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step >= o.warmup) total += seconds;
    r.loss = out.loss.item<double>();
  }
  if (!o.profile.empty()) {
    torch::autograd::profiler::RecordProfile guard(o.profile + (sparse ? ".xmod" : ".dense"));
    model->zero_grad();
    ModelOutput out = model->forward(input, target, RoutingMode::kTopK);
    (out.loss + out.aux_loss).backward();
  }
  const double tokens_per_step = static_cast<double>(batch) * o.seq_len;
  r.step_seconds = total / o.steps;
  r.tokens_per_second = tokens_per_step / r.step_seconds;
  r.train_flops_per_token = acc->train_flops_per_token;
  r.flops_per_second = r.tokens_per_second * acc->train_flops_per_token;
  r.peak_rss_mib = PeakRssMiB();
  r.layers = acc->layers;
  return r;
}

// fp32 matrix-product peak at this thread count, FLOP/s.
double MeasurePeak(int threads) {
  torch::set_num_threads(threads);
  torch::Tensor a = torch::randn({1024, 1024}), b = torch::randn({1024, 1024});
  torch::matmul(a, b);
  const int reps = 20;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) torch::matmul(a, b);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return reps * 2.0 * 1024 * 1024 * 1024 / seconds;
}

// Runs fn in a child process and returns what it wrote.
template <typename T, typename Fn>
T InChild(Fn fn) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(3);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    T value = fn();
    if (write(fds[1], &value, sizeof(value)) != static_cast<ssize_t>(sizeof(value))) _exit(4);
    _exit(0);
  }
  close(fds[1]);
  T value{};
  const bool ok = read(fds[0], &value, sizeof(value)) == static_cast<ssize_t>(sizeof(value));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "measurement child failed\n");
    std::exit(5);
  }
  return value;
}

void Print(const char* name, const BenchOptions& o, const Result& r, double peak) {
  std::printf(
      "model=%s L=%d threads=%d layers=%d step_s=%.4f tokens_per_s=%.1f train_flops_per_token=%.4g "
      "achieved_gflops=%.2f peak_gflops=%.2f of_peak=%.3f peak_rss_mib=%.1f loss=%.4f\n",
      name, o.seq_len, o.threads, r.layers, r.step_seconds, r.tokens_per_second,
      r.train_flops_per_token, r.flops_per_second / 1e9, peak / 1e9, r.flops_per_second / peak,
      r.peak_rss_mib, r.loss);
}

int Main(int argc, char** argv) {
  BenchOptions o;
  CLI::App app{"X-MoD vs Dense training-step benchmark"};
  app.add_option("--backbone", o.backbone, "backbone preset");
  app.add_option("--seq_len", o.seq_len, "context length L");
  app.add_option("--tokens_per_step", o.tokens_per_step, "tokens per step (batch = this / L)");
  app.add_option("--k", o.k, "X-MoD token sparsity K");
  app.add_option("--a", o.a, "X-MoD anchor stride A");
  app.add_option("--n0", o.n0, "X-MoD dense prefix N0 (-1 = default)");
  app.add_option("--threads", o.threads, "torch intra-op threads");
  app.add_option("--warmup", o.warmup, "untimed steps");
  app.add_option("--steps", o.steps, "timed steps");
  app.add_option("--arch", o.arch, "dense | xmod | both | plan");
  app.add_option("--profile", o.profile, "write a chrome trace of one step to PATH.{dense,xmod}");
  CLI11_PARSE(app, argc, argv);

  if (o.arch == "plan") {  // layer kinds and FLOPs for the eager script
    for (bool sparse : {false, true}) {
      absl::StatusOr<Accounting> acc = Account(MakeSpec(o, sparse), o.seq_len);
      if (!acc.ok()) return 2;
      std::string kinds;
      for (LayerKind kind : acc->plan.layers) kinds += kind == LayerKind::kDense ? 'D' : 'S';
      std::string intervals;
      for (int i : acc->plan.interval_of_layer) intervals += std::to_string(i) + ",";
      std::printf("%s plan=%s intervals=%s train_flops_per_token=%.6g\n", sparse ? "xmod" : "dense",
                  kinds.c_str(), intervals.c_str(), acc->train_flops_per_token);
    }
    return 0;
  }
  const double peak = InChild<double>([&] { return MeasurePeak(o.threads); });
  Result dense, sparse;
  if (o.arch == "dense" || o.arch == "both") {
    dense = InChild<Result>([&] { return Measure(o, false); });
    Print("dense", o, dense, peak);
  }
  if (o.arch == "xmod" || o.arch == "both") {
    sparse = InChild<Result>([&] { return Measure(o, true); });
    Print("xmod", o, sparse, peak);
  }
  if (o.arch == "both") {
    const double time_ratio = sparse.step_seconds / dense.step_seconds;
    const double flop_ratio = sparse.train_flops_per_token / dense.train_flops_per_token;
    std::printf(
        "ratio L=%d threads=%d K=%d A=%g step_time_ratio=%.4f phi_ratio=%.4f "
        "efficiency_ratio=%.4f (must be <= 1.0)\n",
        o.seq_len, o.threads, o.k, o.a, time_ratio, flop_ratio, time_ratio / flop_ratio);
  }
  return 0;
}

}  // namespace
}  // namespace xmod

int main(int argc, char** argv) { return xmod::Main(argc, argv); }
