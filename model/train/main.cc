// xmod-train: trains one run to its FLOP budget (see model/train/trainer.h and the worker
// contract in docs/worker-trainer-contract.md, whose command line, event stream and exit codes
// are in trainer_contract/). Parses flags, applies the thread budget, installs the SIGTERM
// handler and calls RunTrainer. Exit codes (trainer_contract/exit_codes.h): 0 = budget spent,
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

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/train/checkpoint.h"
#include "model/train/heap.h"
#include "model/train/lease.h"
#include "model/train/run_spec_file.h"
#include "model/train/threads.h"
#include "model/train/trainer.h"
#include "trainer_contract/event_stream.h"
#include "trainer_contract/exit_codes.h"
#include "trainer_contract/trainer_args.h"

namespace {

std::atomic<bool> g_stop{false};

void OnSigterm(int) { g_stop.store(true); }

// The exit code of a failed run, by the kind of failure (exit_codes.h). The trainer returns
// INVALID_ARGUMENT for a bad spec or option, INTERNAL "... (diverged)" for a non-finite loss,
// DATA_LOSS for a checkpoint or shard that fails verification, "out of memory at ..." for a
// step that ran out (Run::OutOfMemory), and LibTorch's or the C++ runtime's out-of-memory
// errors elsewhere as text. A full disk (RESOURCE_EXHAUSTED without those words) is not memory.
int ExitCodeFor(const absl::Status& status) {
  const std::string message = absl::AsciiStrToLower(status.message());
  if (absl::StrContains(message, "out of memory") || absl::StrContains(message, "bad_alloc") ||
      absl::StrContains(message, "can't allocate memory")) {
    return xmod::kExitOutOfMemory;
  }
  if (absl::IsInvalidArgument(status)) return xmod::kExitInvalidConfig;
  if (absl::IsDataLoss(status)) return xmod::kExitDataLoss;
  if (absl::IsInternal(status) && absl::StrContains(message, "diverged")) {
    return xmod::kExitDiverged;
  }
  return xmod::kExitFailure;
}

// Picks the resume checkpoint among the --resume candidates of `args` (newest first, with
// their digests and sizes when given) and reports each refused candidate on `events`.
// DATA_LOSS when none verifies.
absl::StatusOr<std::string> ChooseResumePath(const xmod::TrainerArgs& args,
                                             xmod::EventWriter& events) {
  const std::vector<std::string>& paths = args.resume;
  std::vector<xmod::ResumeCandidate> candidates;
  for (size_t i = 0; i < paths.size(); ++i) {
    candidates.push_back({paths[i], args.resume_sha256.empty() ? "" : args.resume_sha256[i],
                          args.resume_bytes.empty() ? 0 : args.resume_bytes[i]});
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

xmod::TrainerOptions OptionsOf(const xmod::TrainerArgs& args) {
  xmod::TrainerOptions options;
  options.events_fd = args.events_fd;
  options.device = args.device;
  options.log_every = args.log_every;
  options.micro_batch_tokens = args.micro_batch_tokens;
  xmod::DistributedOptions& dist = options.distributed;
  dist.rank = args.rank;
  dist.world_size = args.world_size;
  dist.rendezvous = args.rendezvous;
  dist.backend = args.backend;
  dist.host = args.dist_host;
  dist.timeout_s = args.dist_timeout_s;
  return options;
}

// --threads, else the spec's training.threads, else every hardware thread.
int ThreadCount(const xmod::TrainerArgs& args, const xmod::v1::RunSpec& spec) {
  int threads = args.threads;
  if (threads <= 0) threads = spec.training().threads();
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return threads;
}

void InstallStopHandlers(xmod::TrainerOptions& options) {
  std::signal(SIGTERM, OnSigterm);
  std::signal(SIGPIPE, SIG_IGN);  // a closed events pipe is reported as a write error
  // Polled after every step: a lapsed lease ends the process here, before anything more.
  options.stop_requested = [](int64_t) {
    xmod::ExitIfLeaseLapsed();
    return g_stop.load();
  };
}

// The last line of stderr of a run that ended well.
void PrintSummary(const xmod::TrainerResult& result, const xmod::DistributedOptions& dist) {
  std::string rank;
  if (dist.world_size > 1) {
    rank = " [rank " + std::to_string(dist.rank) + "/" + std::to_string(dist.world_size) +
           ", parameters sha256 " + result.parameters_sha256 + "]";
  }
  std::fprintf(stderr,
               "xmod-train: %s after %lld steps, %.0f tokens/s, %.3g FLOP/s achieved, val/loss "
               "%.4f, %.1f s%s\n",
               result.preempted ? "stopped (SIGTERM)" : "done",
               static_cast<long long>(result.steps), result.tokens_per_second,
               result.achieved_flops_per_second, result.final_val_loss, result.seconds,
               rank.c_str());
}
}  // namespace

int main(int argc, char** argv) {
  // The command line is the worker contract's (trainer_contract/trainer_args.h); a command
  // line this binary cannot parse exits kExitBadFlags.
  const xmod::ParsedTrainerArgs parsed =
      xmod::TrainerArgs::Parse(argc, argv, "xmod-train", "LibTorch " TORCH_VERSION);
  if (!parsed.args.has_value()) return parsed.exit_code;
  const xmod::TrainerArgs& args = *parsed.args;
  xmod::TrainerOptions options = OptionsOf(args);

  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (args.lease_deadline_ms > 0) xmod::InstallLease(args.lease_deadline_ms, args.lease_fd);

  absl::StatusOr<xmod::v1::RunSpec> spec = xmod::ReadRunSpec(args.spec);
  if (!spec.ok()) {
    std::fprintf(stderr, "xmod-train: %s\n", std::string(spec.status().message()).c_str());
    return ExitCodeFor(spec.status());
  }
  options.spec = *std::move(spec);
  xmod::ApplyThreadBudget(ThreadCount(args, options.spec));
  xmod::KeepFreedMemoryInProcess();
  InstallStopHandlers(options);

  if (!args.resume.empty()) {
    xmod::EventWriter events(options.distributed.rank == 0 ? options.events_fd : -1);
    absl::StatusOr<std::string> resume = ChooseResumePath(args, events);
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
  PrintSummary(*result, options.distributed);
  return result->preempted ? xmod::kExitPreempted : xmod::kExitOk;
}
