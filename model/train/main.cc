// xmod-train: trains one run to its FLOP budget (see model/train/trainer.h and the worker
// contract in the team notes). Parses flags, applies the thread budget, installs the SIGTERM
// handler and calls RunTrainer. Exit 0 = budget spent, 75 = stopped by SIGTERM after a
// checkpoint, 1 = failure (the reason on the last line of stderr), 2 = bad flags.
#include <glog/logging.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "CLI/CLI.hpp"
#include "model/train/run_spec_file.h"
#include "model/train/threads.h"
#include "model/train/trainer.h"

namespace {

constexpr int kExitPreempted = 75;  // EX_TEMPFAIL: the worker may resume from the checkpoint
std::atomic<bool> g_stop{false};

void OnSigterm(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"xmod-train: trains one xmod run (a RunSpec) to its training-FLOP budget"};
  std::string spec_path;
  int threads = 0;
  xmod::TrainerOptions options;
  app.add_option("--spec", spec_path, "RunSpec file: .pb (binary), .textpb (text) or .json")
      ->required();
  app.add_option("--events_fd", options.events_fd,
                 "file descriptor for size-delimited TrainerEvent messages (-1: none)");
  app.add_option("--threads", threads,
                 "CPU threads (0: training.threads of the spec, else all cores)");
  app.add_option("--resume", options.resume_path, "checkpoint to resume from");
  app.add_option("--device", options.device, "cpu or cuda:N");
  options.log_every = 10;
  app.add_option("--log_every", options.log_every, "train/* metrics and a log line every N steps");
  app.add_option("--micro_batch_tokens", options.micro_batch_tokens,
                 "tokens per forward/backward (0: the whole batch)");
  CLI11_PARSE(app, argc, argv);

  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);

  absl::StatusOr<xmod::v1::RunSpec> spec = xmod::ReadRunSpec(spec_path);
  if (!spec.ok()) {
    std::fprintf(stderr, "xmod-train: %s\n", std::string(spec.status().message()).c_str());
    return 1;
  }
  options.spec = *std::move(spec);
  if (threads <= 0) threads = options.spec.training().threads();
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  xmod::ApplyThreadBudget(threads);

  std::signal(SIGTERM, OnSigterm);
  std::signal(SIGPIPE, SIG_IGN);  // a closed events pipe is reported as a write error
  options.stop_requested = [](int64_t) { return g_stop.load(); };

  absl::StatusOr<xmod::TrainerResult> result = xmod::RunTrainer(options);
  if (!result.ok()) {
    std::fprintf(stderr, "xmod-train: %s\n", result.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr,
               "xmod-train: %s after %lld steps, %.0f tokens/s, %.3g FLOP/s achieved, val/loss "
               "%.4f, %.1f s\n",
               result->preempted ? "stopped (SIGTERM)" : "done",
               static_cast<long long>(result->steps), result->tokens_per_second,
               result->achieved_flops_per_second, result->final_val_loss, result->seconds);
  return result->preempted ? kExitPreempted : 0;
}
