// xmod-train: trains one run to its FLOP budget (see model/train/trainer.h and the worker
// contract in docs/design.md). Parses flags, applies the thread budget, installs the SIGTERM
// handler and calls RunTrainer. Exit codes (model/train/exit_codes.h): 0 = budget spent,
// 75 = stopped by SIGTERM after a checkpoint, 3..6 = a failure of a known kind (invalid
// configuration, diverged loss, out of memory, data loss), 1 = any other failure; the reason
// is on the last line of stderr.
//
// Fencing (model/train/lease.h): with --lease_deadline_ms the process exits with
// kExitLeaseExpired, writing nothing more, once that CLOCK_MONOTONIC time passes without an
// extension on --lease_fd. Resume: --resume may repeat (newest first), each with the
// --resume_sha256 the coordinator recorded; the first candidate whose file verifies is
// loaded, and each one refused before it is reported as a resume_rejected event.
//
// Data parallelism: start W processes with the same --spec and --rendezvous, --world_size W
// and --rank 0..W-1 (each with its own --threads / --device); rank 0 alone writes events and
// checkpoints. See trainer.h and distributed_options.h.
#include <glog/logging.h>
#include <torch/version.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "model/train/checkpoint.h"
#include "model/train/events.h"
#include "model/train/exit_codes.h"
#include "model/train/lease.h"
#include "model/train/run_spec_file.h"
#include "model/train/threads.h"
#include "model/train/trainer.h"

namespace {

std::atomic<bool> g_stop{false};

void OnSigterm(int) { g_stop.store(true); }

// The exit code of a failed run, by the kind of failure (exit_codes.h). The trainer returns
// INVALID_ARGUMENT for a bad spec or option, INTERNAL "... (diverged)" for a non-finite loss,
// DATA_LOSS for a checkpoint or shard that fails verification, and LibTorch's or the C++
// runtime's out-of-memory errors as text.
int ExitCodeFor(const absl::Status& status) {
  const std::string message = absl::AsciiStrToLower(status.message());
  if (absl::StrContains(message, "out of memory") || absl::StrContains(message, "bad_alloc") ||
      absl::IsResourceExhausted(status)) {
    return xmod::kExitOutOfMemory;
  }
  if (absl::IsInvalidArgument(status)) return xmod::kExitInvalidConfig;
  if (absl::IsDataLoss(status)) return xmod::kExitDataLoss;
  if (absl::IsInternal(status) && absl::StrContains(message, "diverged")) {
    return xmod::kExitDiverged;
  }
  return xmod::kExitFailure;
}

// Picks the resume checkpoint among `paths` (newest first, digests in `sha256s`, which is
// empty or as long) and reports each refused candidate on `events`. DATA_LOSS when none
// verifies.
absl::StatusOr<std::string> ChooseResumePath(const std::vector<std::string>& paths,
                                             const std::vector<std::string>& sha256s,
                                             xmod::EventWriter& events) {
  std::vector<xmod::ResumeCandidate> candidates;
  for (size_t i = 0; i < paths.size(); ++i) {
    candidates.push_back({paths[i], sha256s.empty() ? "" : sha256s[i]});
  }
  xmod::ResumeChoice choice = xmod::ChooseResume(candidates);
  for (const xmod::ResumeRejection& rejection : choice.rejected) {
    LOG(WARNING) << "not resuming from " << rejection.candidate.path << ": " << rejection.reason;
    xmod::v1::TrainerEvent event;
    xmod::v1::TrainerResumeRejected* rejected = event.mutable_resume_rejected();
    rejected->set_path(rejection.candidate.path);
    rejected->set_sha256(rejection.candidate.sha256);
    rejected->set_reason(rejection.reason.ToString());
    if (absl::Status s = events.Write(event); !s.ok()) return s;
  }
  if (!choice.chosen.has_value()) {
    return absl::DataLossError(
        absl::StrCat("none of the ", paths.size(), " resume checkpoints verified"));
  }
  if (!choice.rejected.empty()) LOG(WARNING) << "falling back to " << choice.chosen->path;
  return choice.chosen->path;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"xmod-train: trains one xmod run (a RunSpec) to its training-FLOP budget"};
  app.set_version_flag("--version", xmod::VersionLine("xmod-train", "LibTorch " TORCH_VERSION));
  std::string spec_path;
  int threads = 0;
  xmod::TrainerOptions options;
  app.add_option("--spec", spec_path, "RunSpec file: .pb (binary), .textpb (text) or .json")
      ->required();
  app.add_option("--events_fd", options.events_fd,
                 "file descriptor for size-delimited TrainerEvent messages (-1: none)");
  app.add_option("--threads", threads,
                 "CPU threads (0: training.threads of the spec, else all cores)");
  std::vector<std::string> resume_paths;
  std::vector<std::string> resume_sha256s;
  app.add_option("--resume", resume_paths,
                 "checkpoint to resume from; repeat for fallbacks, newest first");
  app.add_option("--resume_sha256", resume_sha256s,
                 "the expected SHA-256 (hex) of each --resume, in the same order (default: "
                 "each file's .sha256 sidecar)");
  int64_t lease_deadline_ms = 0;
  int lease_fd = -1;
  app.add_option("--lease_deadline_ms", lease_deadline_ms,
                 "CLOCK_MONOTONIC ms at which the attempt's lease lapses: exit 7 without "
                 "writing (0: no lease)");
  app.add_option("--lease_fd", lease_fd,
                 "file descriptor of size-delimited TrainerControl messages extending the "
                 "lease (-1: none)");
  app.add_option("--device", options.device, "cpu or cuda:N");
  app.add_option("--log_every", options.log_every,
                 "train/* metrics and a log line every N steps (0 = training.log_every_steps)");
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and succeed; a command line this binary cannot parse is
    // kExitBadFlags (another worker's binary may match), not CLI11's own codes.
    const int code = app.exit(e);
    return code == 0 ? xmod::kExitOk : xmod::kExitBadFlags;
  }

  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (lease_deadline_ms > 0) xmod::InstallLease(lease_deadline_ms, lease_fd);
  if (!resume_sha256s.empty() && resume_sha256s.size() != resume_paths.size()) {
    std::fprintf(stderr, "xmod-train: --resume_sha256 given %zu times for %zu --resume\n",
                 resume_sha256s.size(), resume_paths.size());
    return xmod::kExitBadFlags;
  }

  absl::StatusOr<xmod::v1::RunSpec> spec = xmod::ReadRunSpec(spec_path);
  if (!spec.ok()) {
    std::fprintf(stderr, "xmod-train: %s\n", std::string(spec.status().message()).c_str());
    return ExitCodeFor(spec.status());
  }
  options.spec = *std::move(spec);
  if (threads <= 0) threads = options.spec.training().threads();
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  xmod::ApplyThreadBudget(threads);

  std::signal(SIGTERM, OnSigterm);
  std::signal(SIGPIPE, SIG_IGN);  // a closed events pipe is reported as a write error
  // Polled after every step: a lapsed lease ends the process here, before anything more.
  options.stop_requested = [](int64_t) {
    xmod::ExitIfLeaseLapsed();
    return g_stop.load();
  };

  if (!resume_paths.empty()) {
    xmod::EventWriter events(dist.rank == 0 ? options.events_fd : -1);
    absl::StatusOr<std::string> resume = ChooseResumePath(resume_paths, resume_sha256s, events);
    if (!resume.ok()) {
      std::fprintf(stderr, "xmod-train: %s\n", resume.status().ToString().c_str());
      return ExitCodeFor(resume.status());
    }
    options.resume_path = *std::move(resume);
  }

  absl::StatusOr<xmod::TrainerResult> result = xmod::RunTrainer(options);
  if (!result.ok()) {
    std::fprintf(stderr, "xmod-train: %s\n", result.status().ToString().c_str());
    return ExitCodeFor(result.status());
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
  return result->preempted ? xmod::kExitPreempted : xmod::kExitOk;
}
