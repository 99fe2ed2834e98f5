// The measurements of bench_model: one model with its batch, timed training steps (forward
// + backward) on a device, and the matrix-product peak of that device in the compute dtype.
// On CUDA each timing is bracketed by SynchronizeDevice, so a step's seconds include its
// queued kernels. Thread-compatible; one measurement per process at a time (the CPU thread
// count is process state).
#ifndef XMOD_BENCH_MODEL_BENCH_SUBJECT_H_
#define XMOD_BENCH_MODEL_BENCH_SUBJECT_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/accounting/accounting.h"
#include "model/autocast.h"
#include "model/device.h"
#include "model/train/parameter_update.h"
#include "model/train/train_step.h"
#include "model/transformer.h"

namespace xmod {

struct BenchOptions {
  std::string backbone = "cpu-d256";  // d = 256, 8 active layers, 8 heads, 4 KV heads
  int seq_len = 1024;
  int tokens_per_step = 4096;
  int k = 4;
  double a = 1;
  int n0 = -1;                  // X-MoD dense prefix; -1 = the default (4)
  std::vector<int> threads{1};  // CPU intra-op thread counts, measured side by side
  int warmup = 1;
  int steps = 3;
  std::string arch = "both";       // dense | xmod | both | plan
  std::string device = "cpu";      // cpu | cuda | cuda:N
  std::string precision = "fp32";  // fp32 | bf16 (autocast around the forward pass)
  std::string attention = "auto";  // auto | fused | manual
  bool checkpointing = false;      // activation checkpointing of the routed stacks
  // none: forward + backward only (the FLOPs the accounting counts); muon | adamw: each step
  // also runs the optimizer update xmod-train runs (training.optimizer), timed on its own.
  std::string optimizer = "none";
  // training.cuda_graphs: auto | on | off. With graphs each phase (forward + backward; the
  // update) is recorded after TrainStep::kWarmupSteps eager steps and replayed; the warm-up
  // then counts at least that many steps and one more, so no recording is timed.
  std::string cuda_graphs = "auto";
  int peak_size = 0;    // side of the square matmuls of the peak; 0 = 1024 CPU, 8192 CUDA
  std::string profile;  // when set: one extra profiled step, chrome trace to this path
};

// What the options resolve to; INVALID_ARGUMENT naming the flag when they do not.
struct BenchSetup {
  torch::Device device{torch::kCPU};
  AutocastState autocast;  // enabled for bf16
  torch::Dtype compute_dtype = torch::kFloat32;
  ModelRuntimeOptions runtime;  // fused attention, activation checkpointing
  bool graphs = false;          // cuda_graphs resolved (UseStepGraphs) on this device
  int warmup = 1;               // untimed steps: the option's, or more to leave recording out
  int peak_size = 1024;
};
absl::StatusOr<BenchSetup> ResolveSetup(const BenchOptions& o);

// The model spec of Dense (sparse = false) or X-MoD at the options' K, A and N0.
xmod::v1::ModelSpec MakeSpec(const BenchOptions& o, bool sparse);

// Trivially copyable: children of the CPU path send it back through a pipe.
struct Result {
  double step_seconds = 0;       // mean over the timed steps
  double best_step_seconds = 0;  // fastest timed step
  double step_cpu_seconds = 0;   // mean CPU time of this process per step (all threads)
  double optimizer_seconds = 0;  // mean wall time of the optimizer update, beside step_seconds
  double tokens_per_second = 0;  // from the mean
  double flops_per_second = 0;   // training FLOPs (accounting) x tokens/s
  double train_flops_per_token = 0;
  // The same with the attention term halved: the FLOPs a causal attention kernel executes
  // (it skips the key/query pairs the mask hides, which the paper's accounting counts).
  double causal_train_flops_per_token = 0;
  double peak_rss_mib = 0;
  double peak_device_mib = 0;  // CUDA caching allocator's peak (0 on CPU)
  double loss = 0;
  int layers = 0;
  int threads = 0;
};

// Wall-clock seconds and the CPU seconds of this process (all its threads) over one interval.
// On a machine shared with other processes the CPU time of a 1-thread measurement is the
// figure that load does not inflate.
struct StepTime {
  double wall = 0;
  double cpu = 0;
  double optimizer_wall = 0;  // of which the optimizer update (0 without --optimizer)
};

// One model with its batch on the device, ready to time training steps.
class Subject {
 public:
  // INVALID_ARGUMENT when the spec does not account (e.g. A*K not a whole number).
  static absl::StatusOr<std::unique_ptr<Subject>> Create(const BenchOptions& o,
                                                         const BenchSetup& setup, bool sparse);

  // One forward + backward (autocast around the forward when bf16), then the optimizer
  // update when there is one, timed apart; the device synchronised around each. Both are
  // xmod-train's TrainStep phases, recorded as graphs when setup.graphs.
  StepTime Step();

  // One step under the profiler, chrome trace to `path`.
  void Profile(const std::string& path);

  // The figures of the timed steps, run at `threads` CPU threads.
  Result Summarize(const std::vector<StepTime>& steps, int threads) const;

  bool sparse() const { return sparse_; }

 private:
  Subject(const BenchOptions& o, const BenchSetup& setup, bool sparse, Accounting acc);

  BenchOptions o_;
  BenchSetup setup_;
  bool sparse_;
  Accounting acc_;
  Transformer model_{nullptr};
  int batch_ = 1;
  torch::Tensor tokens_;  // (B, L + 1) int64 on the device: inputs and their next tokens
  std::unique_ptr<ParameterUpdate> update_;  // --optimizer muon | adamw, at its defaults
  std::unique_ptr<TrainStep> step_;
};

// Matrix-product FLOP/s of this device in `setup.compute_dtype` at the current thread count:
// the best of several short trials of (n x n) @ (n x n), n = setup.peak_size, so that a
// burst of load from other processes does not lower it; per wall-clock second and per
// CPU second of this process.
struct Peak {
  double flops_per_second = 0;
  double flops_per_cpu_second = 0;
};
Peak MeasurePeak(const BenchSetup& setup);

// Peak resident set size of this process, MiB.
double PeakRssMiB();

}  // namespace xmod

#endif  // XMOD_BENCH_MODEL_BENCH_SUBJECT_H_
