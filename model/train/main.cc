// xmod-train: trains one run to its FLOP budget (see model/train/trainer.h and the worker
// contract in the team notes). Parses flags, applies the thread budget, installs the SIGTERM
// handler and calls RunTrainer. Exit 0 = budget spent, 75 = stopped by SIGTERM after a
// checkpoint, 1 = failure (the reason on the last line of stderr), 2 = bad flags.
//
// Data parallelism: start W processes with the same --spec and --rendezvous, --world_size W
// and --rank 0..W-1 (each with its own --threads / --device); rank 0 alone writes events and
// checkpoints. See trainer.h and distributed_options.h.
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
                 "tokens per forward/backward on each rank (0: the rank's whole share)");
  xmod::DistributedOptions& dist = options.distributed;
  app.add_option("--rank", dist.rank, "data-parallel rank of this process, 0..world_size-1");
  app.add_option("--world_size", dist.world_size, "data-parallel processes of the run");
  app.add_option("--rendezvous", dist.rendezvous,
                 "where the ranks meet: a fresh c10d FileStore path all ranks see, or "
                 "tcp://HOST:PORT (rank 0 serves a TCPStore there)");
  app.add_option("--backend", dist.backend, "collectives: gloo (CPU) or nccl (CUDA builds)");
  app.add_option("--dist_host", dist.host,
                 "address/hostname this rank's Gloo transport binds to (default: the "
                 "hostname if it resolves, else loopback)");
  app.add_option("--dist_timeout_s", dist.timeout_s,
                 "seconds a rank waits for the others at rendezvous and at each collective");
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
  std::string rank;
  if (dist.world_size > 1) {
    rank = " [rank " + std::to_string(dist.rank) + "/" + std::to_string(dist.world_size) +
           ", parameters sha256 " + result->parameters_sha256 + "]";
  }
  std::fprintf(stderr,
               "xmod-train: %s after %lld steps, %.0f tokens/s, %.3g FLOP/s achieved, val/loss "
               "%.4f, %.1f s%s\n",
               result->preempted ? "stopped (SIGTERM)" : "done",
               static_cast<long long>(result->steps), result->tokens_per_second,
               result->achieved_flops_per_second, result->final_val_loss, result->seconds,
               rank.c_str());
  return result->preempted ? kExitPreempted : 0;
}
