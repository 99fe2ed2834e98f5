// bench_model: training-step time (forward + backward) of X-MoD against Dense at CPU sizes
// (issue 3 "Performance"): tokens/s, achieved FLOP/s (the accounting's training FLOPs per
// token, paper B.1) against this machine's measured matrix-product peak, peak RSS, and the
// efficiency ratio (t_xmod / t_dense) / (phi / phi_D), which must be <= 1.0 when the sparse
// layers really skip the work.
//
// Each measurement runs in a forked child so that its peak RSS is its own; with --arch both
// the two models are built in one child and their steps alternate (dense, xmod, dense, ...)
// so that load from other processes falls on both alike — the ratio is the figure that
// matters — and the peak RSS printed is then that of both models together (use --arch dense
// or --arch xmod for each model's own). Thread budget:
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
#include <memory>
#include <string>
#include <utility>
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

// One model with its batch, ready to time training steps.
class Subject {
 public:
  Subject(const BenchOptions& o, bool sparse) : o_(o), sparse_(sparse) {
    xmod::v1::ModelSpec spec = MakeSpec(o, sparse);
    absl::StatusOr<Accounting> acc = Account(spec, o.seq_len);
    if (!acc.ok()) {
      std::fprintf(stderr, "%s\n", acc.status().ToString().c_str());
      std::exit(2);
    }
    acc_ = *acc;
    model_ = Transformer(spec, acc_, o.seq_len);
    model_->train();
    batch_ = std::max(1, o.tokens_per_step / o.seq_len);
    torch::Tensor tokens =
        torch::randint(0, acc_.backbone.vocab_size, {batch_, o.seq_len + 1}, torch::kLong);
    input_ = tokens.narrow(1, 0, o.seq_len).contiguous();   // (B, L)
    target_ = tokens.narrow(1, 1, o.seq_len).contiguous();  // (B, L)
  }

  // One forward + backward; returns its seconds.
  double Step() {
    model_->zero_grad();
    auto start = std::chrono::steady_clock::now();
    ModelOutput out = model_->forward(input_, target_, RoutingMode::kTopK);
    (out.loss + out.aux_loss).backward();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    loss_ = out.loss.item<double>();
    return seconds;
  }

  void Profile() {
    torch::autograd::profiler::RecordProfile guard(o_.profile + (sparse_ ? ".xmod" : ".dense"));
    Step();
  }

  Result Summarize(double total_seconds) const {
    Result r;
    const double tokens_per_step = static_cast<double>(batch_) * o_.seq_len;
    r.step_seconds = total_seconds / o_.steps;
    r.tokens_per_second = tokens_per_step / r.step_seconds;
    r.train_flops_per_token = acc_.train_flops_per_token;
    r.flops_per_second = r.tokens_per_second * acc_.train_flops_per_token;
    r.peak_rss_mib = PeakRssMiB();
    r.loss = loss_;
    r.layers = acc_.layers;
    return r;
  }

 private:
  BenchOptions o_;
  bool sparse_;
  Accounting acc_;
  Transformer model_{nullptr};
  int batch_ = 1;
  torch::Tensor input_, target_;
  double loss_ = 0;
};

// Times the given models step by step, alternating between them so that load from other
// processes falls on all of them alike. Returns one Result per model.
std::vector<Result> Measure(const BenchOptions& o, const std::vector<bool>& sparse) {
  torch::set_num_threads(o.threads);
  torch::manual_seed(0);
  std::vector<std::unique_ptr<Subject>> subjects;
  for (bool s : sparse) subjects.push_back(std::make_unique<Subject>(o, s));
  std::vector<double> total(subjects.size(), 0.0);
  for (int step = 0; step < o.warmup + o.steps; ++step) {
    for (size_t i = 0; i < subjects.size(); ++i) {
      const double seconds = subjects[i]->Step();
      if (step >= o.warmup) total[i] += seconds;
    }
  }
  if (!o.profile.empty()) {
    for (auto& subject : subjects) subject->Profile();
  }
  std::vector<Result> results;
  for (size_t i = 0; i < subjects.size(); ++i) results.push_back(subjects[i]->Summarize(total[i]));
  return results;
}

// fp32 matrix-product peak at this thread count, FLOP/s: the best of several short trials,
// so that a burst of load from other processes does not lower it.
double MeasurePeak(int threads) {
  torch::set_num_threads(threads);
  torch::Tensor a = torch::randn({1024, 1024}), b = torch::randn({1024, 1024});
  torch::matmul(a, b);
  const int reps = 3;
  double best = 0;
  for (int trial = 0; trial < 10; ++trial) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) torch::matmul(a, b);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, reps * 2.0 * 1024 * 1024 * 1024 / seconds);
  }
  return best;
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
  using Pair = std::pair<Result, Result>;
  if (o.arch == "both") {  // interleaved in one process; peak RSS is that of both models
    Pair both = InChild<Pair>([&] {
      std::vector<Result> r = Measure(o, {false, true});
      return Pair{r[0], r[1]};
    });
    dense = both.first;
    sparse = both.second;
  } else if (o.arch == "dense") {
    dense = InChild<Result>([&] { return Measure(o, {false})[0]; });
  } else if (o.arch == "xmod") {
    sparse = InChild<Result>([&] { return Measure(o, {true})[0]; });
  }
  if (o.arch != "xmod") Print("dense", o, dense, peak);
  if (o.arch != "dense") Print("xmod", o, sparse, peak);
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
