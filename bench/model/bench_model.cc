// bench_model: training-step time (forward + backward) of X-MoD against Dense: tokens/s,
// achieved FLOP/s (the accounting's training FLOPs per
// token, paper B.1) against the matrix-product peak of the same device in the compute dtype
// measured in the same process (MFU = of_peak), peak memory, and the efficiency ratio
// (t_xmod / t_dense) / (phi / phi_D), which must be <= 1.0 on CPU when the sparse layers
// really skip the work.
//
// CPU: everything runs in one forked child, so that its peak RSS is its own and nothing of
// the parent's state is shared; the models' steps alternate (dense, xmod, dense, ...) and,
// with several --threads values (e.g. 1,2), so do the thread counts, so that load from
// other processes falls on every configuration alike — the ratios are the figures that
// matter. The peak is measured at each thread count before and after the steps (the best
// trial counts). Peak RSS is that of everything in the child. The thread budget (torch
// intra-op threads, OpenMP, MKL) is model/train/threads.h's, as in xmod-train.
// CUDA: in-process (a fork after CUDA initialisation is unsafe), models one after the
// other, each with its own peak-memory window; every timing is bracketed by a device
// synchronisation.
//
// On a machine shared with other processes the wall-clock figures carry their load; the CPU
// time of this process is measured too (step_cpu_s), and of_peak_cpu compares FLOPs per CPU
// second with the peak's — with one thread, the efficiency that load does not distort.
//
// With --optimizer muon|adamw each step also runs xmod-train's optimizer update (gradient
// clipping, Muon's Newton–Schulz, AdamW), timed apart: step_s and the ratios above stay
// forward + backward, the FLOPs the accounting counts, and optimizer_s with
// train_tokens_per_s and train_step_time_ratio say what a sweep's step costs on top.
//
// Output: one "key=value" line per model and thread count, a ratio line per thread count
// and a scaling line per extra thread count; or, with --json, one JSON object on stdout.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/model/bench_subject.h"
#include "model/attention_backend.h"
#include "model/train/heap.h"
#include "model/train/threads.h"

namespace xmod {
namespace {

constexpr int kMaxThreadCounts = 8;

// Everything measured, trivially copyable so that the CPU child can send it back.
struct Measurement {
  int thread_counts = 0;
  Peak peak[kMaxThreadCounts] = {};     // at threads[i]
  Result dense[kMaxThreadCounts] = {};  // at threads[i]
  Result sparse[kMaxThreadCounts] = {};
};

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "bench_model: %s\n", message.c_str());
  std::exit(2);
}

std::unique_ptr<Subject> MakeSubject(const BenchOptions& o, const BenchSetup& setup, bool sparse) {
  absl::StatusOr<std::unique_ptr<Subject>> subject = Subject::Create(o, setup, sparse);
  if (!subject.ok()) Fail(subject.status().ToString());
  return *std::move(subject);
}

void Store(Measurement* m, int i, const Result& r, bool sparse) {
  (sparse ? m->sparse : m->dense)[i] = r;
}

// CPU: all models and thread counts interleaved step by step in this process.
Measurement MeasureInterleaved(const BenchOptions& o, const BenchSetup& setup,
                               const std::vector<bool>& models) {
  Measurement m;
  m.thread_counts = static_cast<int>(o.threads.size());
  for (int i = 0; i < m.thread_counts; ++i) {
    ApplyThreadBudget(o.threads[i]);
    m.peak[i] = MeasurePeak(setup);
  }
  torch::manual_seed(0);
  std::vector<std::unique_ptr<Subject>> subjects;
  for (bool sparse : models) subjects.push_back(MakeSubject(o, setup, sparse));
  // times[i][s]: timed steps of subject s at threads[i]
  std::vector<std::vector<std::vector<StepTime>>> times(
      m.thread_counts, std::vector<std::vector<StepTime>>(subjects.size()));
  for (int round = 0; round < setup.warmup + o.steps; ++round) {
    for (int i = 0; i < m.thread_counts; ++i) {
      ApplyThreadBudget(o.threads[i]);
      for (size_t s = 0; s < subjects.size(); ++s) {
        const StepTime step = subjects[s]->Step();
        if (round >= setup.warmup) times[i][s].push_back(step);
      }
    }
  }
  for (int i = 0; i < m.thread_counts; ++i) {
    ApplyThreadBudget(o.threads[i]);
    const Peak again = MeasurePeak(setup);
    m.peak[i].flops_per_second = std::max(m.peak[i].flops_per_second, again.flops_per_second);
    m.peak[i].flops_per_cpu_second =
        std::max(m.peak[i].flops_per_cpu_second, again.flops_per_cpu_second);
  }
  if (!o.profile.empty()) {
    ApplyThreadBudget(o.threads[0]);
    for (auto& s : subjects) s->Profile(o.profile + (s->sparse() ? ".xmod" : ".dense"));
  }
  for (int i = 0; i < m.thread_counts; ++i) {
    for (size_t s = 0; s < subjects.size(); ++s) {
      Store(&m, i, subjects[s]->Summarize(times[i][s], o.threads[i]), subjects[s]->sparse());
    }
  }
  return m;
}

// CUDA: the models one after the other, each in its own peak-memory window.
Measurement MeasureSequential(const BenchOptions& o, const BenchSetup& setup,
                              const std::vector<bool>& models) {
  Measurement m;
  m.thread_counts = 1;
  ApplyThreadBudget(o.threads[0]);
  m.peak[0] = MeasurePeak(setup);
  for (bool sparse : models) {
    torch::manual_seed(0);
    SynchronizeDevice(setup.device);
    ResetPeakDeviceMemory(setup.device);
    std::unique_ptr<Subject> subject = MakeSubject(o, setup, sparse);
    std::vector<StepTime> times;
    for (int step = 0; step < setup.warmup + o.steps; ++step) {
      const StepTime t = subject->Step();
      if (step >= setup.warmup) times.push_back(t);
    }
    if (!o.profile.empty()) subject->Profile(o.profile + (sparse ? ".xmod" : ".dense"));
    Store(&m, 0, subject->Summarize(times, o.threads[0]), sparse);
  }
  return m;
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
  size_t got = 0;
  char* bytes = reinterpret_cast<char*>(&value);
  for (ssize_t n; got < sizeof(value) && (n = read(fds[0], bytes + got, sizeof(value) - got)) > 0;)
    got += n;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != sizeof(value) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench_model: measurement child failed\n");
    std::exit(5);
  }
  return value;
}

// X-MoD against Dense: step time ratio over phi (the paper's FLOP ratio), and over the ratio
// of the FLOPs causal kernels execute (attention halved in both): where attention runs at
// the speed of the matrix products, the second is the ratio the time can reach, and the
// first exceeds 1 by the share of attention Dense has and X-MoD has not.
// train_time: the same time ratio with the optimizer update added to each step.
struct Ratio {
  double time = 0, phi = 0, efficiency = 0, causal_phi = 0, causal_efficiency = 0, train_time = 0;
};
Ratio RatioOf(const Result& dense, const Result& sparse) {
  Ratio r;
  r.time = sparse.step_seconds / dense.step_seconds;
  r.train_time = (sparse.step_seconds + sparse.optimizer_seconds) /
                 (dense.step_seconds + dense.optimizer_seconds);
  r.phi = sparse.train_flops_per_token / dense.train_flops_per_token;
  r.efficiency = r.time / r.phi;
  r.causal_phi = sparse.causal_train_flops_per_token / dense.causal_train_flops_per_token;
  r.causal_efficiency = r.time / r.causal_phi;
  return r;
}

// Tokens per second of the whole training step: forward, backward and optimizer update.
double TrainTokensPerSecond(const Result& r) {
  return r.tokens_per_second * r.step_seconds / (r.step_seconds + r.optimizer_seconds);
}

// Achieved FLOPs per CPU second of the process against the peak's: with one thread, the
// fraction of peak that load from other processes does not distort (with more, it also
// charges the threads' idle spinning).
double OfPeakCpu(const Result& r, const Peak& peak) {
  const double tokens_per_step = r.tokens_per_second * r.step_seconds;
  return tokens_per_step * r.train_flops_per_token / r.step_cpu_seconds / peak.flops_per_cpu_second;
}

// The models measured: Dense (false) unless --arch xmod, X-MoD (true) unless --arch dense.
std::vector<bool> Models(const BenchOptions& o) {
  std::vector<bool> models;
  if (o.arch != "xmod") models.push_back(false);
  if (o.arch != "dense") models.push_back(true);
  return models;
}

const char* ModelName(bool sparse) { return sparse ? "xmod" : "dense"; }

const Result& ResultAt(const Measurement& m, int i, bool sparse) {
  return sparse ? m.sparse[i] : m.dense[i];
}

void PrintResultLine(const BenchOptions& o, const char* attention, bool sparse, const Result& r,
                     const Peak& peak) {
  std::printf(
      "model=%s L=%d threads=%d device=%s precision=%s attention=%s layers=%d step_s=%.4f "
      "best_step_s=%.4f tokens_per_s=%.1f train_flops_per_token=%.4g achieved_gflops=%.2f "
      "peak_gflops=%.2f of_peak=%.3f step_cpu_s=%.4f of_peak_cpu=%.3f peak_rss_mib=%.1f "
      "peak_device_mib=%.1f loss=%.4f optimizer_s=%.4f train_tokens_per_s=%.1f\n",
      ModelName(sparse), o.seq_len, r.threads, o.device.c_str(), o.precision.c_str(), attention,
      r.layers, r.step_seconds, r.best_step_seconds, r.tokens_per_second, r.train_flops_per_token,
      r.flops_per_second / 1e9, peak.flops_per_second / 1e9,
      r.flops_per_second / peak.flops_per_second, r.step_cpu_seconds, OfPeakCpu(r, peak),
      r.peak_rss_mib, r.peak_device_mib, r.loss, r.optimizer_seconds, TrainTokensPerSecond(r));
}

void PrintRatioLine(const BenchOptions& o, int threads, const Ratio& r) {
  std::printf(
      "ratio L=%d threads=%d K=%d A=%g step_time_ratio=%.4f phi_ratio=%.4f "
      "efficiency_ratio=%.4f causal_phi_ratio=%.4f causal_efficiency_ratio=%.4f "
      "train_step_time_ratio=%.4f\n",
      o.seq_len, threads, o.k, o.a, r.time, r.phi, r.efficiency, r.causal_phi, r.causal_efficiency,
      r.train_time);
}

void PrintText(const BenchOptions& o, const BenchSetup& setup, const Measurement& m) {
  const std::vector<bool> models = Models(o);
  const char* attention = setup.runtime.fused_attention ? "fused" : "manual";
  for (int i = 0; i < m.thread_counts; ++i) {
    for (bool s : models) PrintResultLine(o, attention, s, ResultAt(m, i, s), m.peak[i]);
    if (models.size() == 2) PrintRatioLine(o, o.threads[i], RatioOf(m.dense[i], m.sparse[i]));
  }
  for (int i = 1; i < m.thread_counts; ++i) {
    for (bool s : models) {
      std::printf("scaling model=%s threads=%d vs_threads=%d tokens_per_s_ratio=%.3f\n",
                  ModelName(s), o.threads[i], o.threads[0],
                  ResultAt(m, i, s).tokens_per_second / ResultAt(m, 0, s).tokens_per_second);
    }
  }
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string JsonResult(const char* name, const Result& r, const Peak& peak) {
  return absl::StrFormat(
      "{\"model\": \"%s\", \"threads\": %d, \"layers\": %d, \"step_s\": %.6g, "
      "\"best_step_s\": %.6g, \"step_cpu_s\": %.6g, \"tokens_per_s\": %.6g, "
      "\"train_flops_per_token\": %.6g, \"achieved_flops_per_s\": %.6g, "
      "\"peak_flops_per_s\": %.6g, \"mfu\": %.4f, \"of_peak_cpu\": %.4f, "
      "\"peak_rss_mib\": %.1f, \"peak_device_mib\": %.1f, \"loss\": %.6g, "
      "\"optimizer_s\": %.6g, \"train_tokens_per_s\": %.6g}",
      name, r.threads, r.layers, r.step_seconds, r.best_step_seconds, r.step_cpu_seconds,
      r.tokens_per_second, r.train_flops_per_token, r.flops_per_second, peak.flops_per_second,
      r.flops_per_second / peak.flops_per_second, OfPeakCpu(r, peak), r.peak_rss_mib,
      r.peak_device_mib, r.loss, r.optimizer_seconds, TrainTokensPerSecond(r));
}

// The arrays of the JSON object, one entry per thread count (and model).
struct JsonArrays {
  std::vector<std::string> results, ratios, scaling, peaks;
};

JsonArrays CollectJsonArrays(const BenchOptions& o, const Measurement& m) {
  const std::vector<bool> models = Models(o);
  JsonArrays out;
  for (int i = 0; i < m.thread_counts; ++i) {
    out.peaks.push_back(
        absl::StrFormat("{\"threads\": %d, \"flops_per_s\": %.6g, \"flops_per_cpu_s\": %.6g}",
                        o.threads[i], m.peak[i].flops_per_second, m.peak[i].flops_per_cpu_second));
    for (bool s : models) {
      out.results.push_back(JsonResult(ModelName(s), ResultAt(m, i, s), m.peak[i]));
    }
    if (models.size() == 2) {
      const Ratio r = RatioOf(m.dense[i], m.sparse[i]);
      out.ratios.push_back(
          absl::StrFormat("{\"threads\": %d, \"step_time_ratio\": %.6g, \"phi_ratio\": %.6g, "
                          "\"efficiency_ratio\": %.6g, \"causal_phi_ratio\": %.6g, "
                          "\"causal_efficiency_ratio\": %.6g, \"train_step_time_ratio\": %.6g}",
                          o.threads[i], r.time, r.phi, r.efficiency, r.causal_phi,
                          r.causal_efficiency, r.train_time));
    }
    if (i == 0) continue;
    for (bool s : models) {
      out.scaling.push_back(absl::StrFormat(
          "{\"model\": \"%s\", \"threads\": %d, \"vs_threads\": %d, \"tokens_per_s_ratio\": "
          "%.6g}",
          ModelName(s), o.threads[i], o.threads[0],
          ResultAt(m, i, s).tokens_per_second / ResultAt(m, 0, s).tokens_per_second));
    }
  }
  return out;
}

void PrintJson(const BenchOptions& o, const BenchSetup& setup, const Measurement& m) {
  const JsonArrays arrays = CollectJsonArrays(o, m);
  std::vector<std::string> backends;  // SDPA's backend per attention shape (CUDA)
  for (const auto& [shape, backend] : SdpaChoices()) {
    backends.push_back(absl::StrCat(JsonString(shape), ": ", JsonString(backend)));
  }
  const std::string json = absl::StrFormat(
      "{\"torch\": %s, \"backbone\": %s, \"seq_len\": %d, \"tokens_per_step\": %d, \"k\": %d, "
      "\"a\": %g, \"n0\": %d, \"device\": %s, \"precision\": %s, \"attention\": %s, "
      "\"activation_checkpointing\": %s, \"optimizer\": %s, \"cuda_graphs\": %s, "
      "\"warmup\": %d, \"steps\": %d, "
      "\"peak_matmul_size\": %d, \"sdpa_backends\": {%s}, \"peaks\": [%s], \"results\": [%s], "
      "\"ratios\": [%s], \"scaling\": [%s]}\n",
      JsonString(TorchBuildSummary()), JsonString(o.backbone), o.seq_len,
      std::max(1, o.tokens_per_step / o.seq_len) * o.seq_len, o.k, o.a, o.n0, JsonString(o.device),
      JsonString(o.precision), JsonString(setup.runtime.fused_attention ? "fused" : "manual"),
      o.checkpointing ? "true" : "false", JsonString(o.optimizer), setup.graphs ? "true" : "false",
      setup.warmup, o.steps, setup.peak_size, absl::StrJoin(backends, ", "),
      absl::StrJoin(arrays.peaks, ", "), absl::StrJoin(arrays.results, ", "),
      absl::StrJoin(arrays.ratios, ", "), absl::StrJoin(arrays.scaling, ", "));
  std::fputs(json.c_str(), stdout);
}

// Layer kinds, FLOPs and backbone of both models, for the PyTorch twins (eager_models.py) and
// the device check.
int PrintPlans(const BenchOptions& o) {
  for (bool sparse : {false, true}) {
    absl::StatusOr<Accounting> acc = Account(MakeSpec(o, sparse), o.seq_len);
    if (!acc.ok()) Fail(acc.status().ToString());
    std::string kinds;
    for (LayerKind kind : acc->plan.layers) kinds += kind == LayerKind::kDense ? 'D' : 'S';
    std::string intervals;
    for (int i : acc->plan.interval_of_layer) intervals += std::to_string(i) + ",";
    const Backbone& bb = acc->backbone;
    std::printf(
        "%s plan=%s intervals=%s train_flops_per_token=%.6g layers=%d d=%d heads=%d "
        "kv_heads=%d head_dim=%d ffn=%d vocab=%d n_layers=%d rope_theta=%g qk_norm=%d\n",
        sparse ? "xmod" : "dense", kinds.c_str(), intervals.c_str(), acc->train_flops_per_token,
        acc->layers, bb.d_model, bb.n_heads, bb.n_kv_heads, bb.head_dim, bb.ffn_dim, bb.vocab_size,
        bb.n_layers, bb.rope_theta, bb.qk_norm ? 1 : 0);
  }
  return 0;
}

void AddOptions(CLI::App& app, BenchOptions& o, bool& json) {
  app.add_option("--backbone", o.backbone, "backbone preset");
  app.add_option("--seq_len", o.seq_len, "context length L");
  app.add_option("--tokens_per_step", o.tokens_per_step, "tokens per step (batch = this / L)");
  app.add_option("--k", o.k, "X-MoD token sparsity K");
  app.add_option("--a", o.a, "X-MoD anchor stride A");
  app.add_option("--n0", o.n0, "X-MoD dense prefix N0 (-1 = default)");
  app.add_option("--threads", o.threads,
                 "CPU threads; a list (1,2) measures each side by side in one process")
      ->delimiter(',');
  app.add_option("--warmup", o.warmup, "untimed steps");
  app.add_option("--steps", o.steps, "timed steps");
  app.add_option("--arch", o.arch, "dense | xmod | both | plan");
  app.add_option("--device", o.device, "cpu | cuda | cuda:N");
  app.add_option("--precision", o.precision, "fp32 | bf16 (autocast around the forward)");
  app.add_option("--attention", o.attention, "auto | fused | manual");
  app.add_flag("--checkpointing", o.checkpointing, "activation checkpointing");
  app.add_option("--optimizer", o.optimizer,
                 "none | muon | adamw: also run and time xmod-train's optimizer update");
  app.add_option("--cuda_graphs", o.cuda_graphs,
                 "auto | on | off: record each phase of the step as a CUDA graph and replay it");
  app.add_option("--peak_size", o.peak_size, "matmul side for the peak (0: 1024 CPU, 8192 CUDA)");
  app.add_flag("--json", json, "print one JSON object instead of key=value lines");
  app.add_option("--profile", o.profile,
                 "write a chrome trace of one step to PATH.{dense,xmod} (op by op: "
                 "bench/model/trace_ops.py)");
}

// Fails on an --arch, --threads, --seq_len, --steps or --warmup out of range.
void CheckOptions(const BenchOptions& o) {
  if (o.arch != "both" && o.arch != "dense" && o.arch != "xmod") {
    Fail("--arch must be dense, xmod, both or plan, got '" + o.arch + "'");
  }
  if (o.threads.empty() || o.threads.size() > kMaxThreadCounts) {
    Fail(absl::StrCat("--threads takes 1 to ", kMaxThreadCounts, " values"));
  }
  for (int t : o.threads) {
    if (t < 1) Fail(absl::StrCat("--threads must be >= 1, got ", t));
  }
  if (o.seq_len < 1 || o.steps < 1 || o.warmup < 0) {
    Fail("--seq_len and --steps must be >= 1, --warmup >= 0");
  }
}

// CUDA in this process, CPU in a child (see the top of the file).
Measurement Measure(const BenchOptions& o, const BenchSetup& setup,
                    const std::vector<bool>& models) {
  if (setup.device.is_cuda()) {
    if (o.threads.size() > 1) Fail("--device cuda takes one --threads value");
    try {
      return MeasureSequential(o, setup, models);
    } catch (const c10::Error& e) {
      Fail(e.what_without_backtrace());
    }
  }
  return InChild<Measurement>([&] {
    try {
      return MeasureInterleaved(o, setup, models);
    } catch (const c10::Error& e) {
      Fail(e.what_without_backtrace());
    }
  });
}

int Main(int argc, char** argv) {
  KeepFreedMemoryInProcess();  // as xmod-train
  BenchOptions o;
  bool json = false;
  CLI::App app{"X-MoD vs Dense training-step benchmark"};
  AddOptions(app, o, json);
  CLI11_PARSE(app, argc, argv);

  if (o.arch == "plan") return PrintPlans(o);
  CheckOptions(o);
  absl::StatusOr<BenchSetup> setup = ResolveSetup(o);
  if (!setup.ok()) Fail(std::string(setup.status().message()));
  const std::vector<bool> models = Models(o);
  for (bool sparse : models) {  // refuse a bad K / A here, not in a child
    absl::StatusOr<Accounting> acc = Account(MakeSpec(o, sparse), o.seq_len);
    if (!acc.ok()) Fail(acc.status().ToString());
  }
  const Measurement m = Measure(o, *setup, models);
  if (json) {
    PrintJson(o, *setup, m);
  } else {
    PrintText(o, *setup, m);
  }
  return 0;
}

}  // namespace
}  // namespace xmod

int main(int argc, char** argv) { return xmod::Main(argc, argv); }
