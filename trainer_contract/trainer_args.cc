// The trainer's command line: flag names, help texts, writing and parsing.
#include "trainer_contract/trainer_args.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "trainer_contract/exit_codes.h"

namespace xmod {
namespace {

constexpr char kSpec[] = "--spec";
constexpr char kEventsFd[] = "--events_fd";
constexpr char kThreads[] = "--threads";
constexpr char kLeaseDeadlineMs[] = "--lease_deadline_ms";
constexpr char kLeaseFd[] = "--lease_fd";
constexpr char kResume[] = "--resume";
constexpr char kResumeSha256[] = "--resume_sha256";
constexpr char kResumeBytes[] = "--resume_bytes";
constexpr char kRank[] = "--rank";
constexpr char kWorldSize[] = "--world_size";
constexpr char kRendezvous[] = "--rendezvous";
constexpr char kDevice[] = "--device";
constexpr char kBackend[] = "--backend";
constexpr char kLogEvery[] = "--log_every";
constexpr char kMicroBatchTokens[] = "--micro_batch_tokens";
constexpr char kDistHost[] = "--dist_host";
constexpr char kDistTimeoutS[] = "--dist_timeout_s";

auto Fields(const TrainerArgs& a) {
  return std::tie(a.spec, a.events_fd, a.threads, a.lease_deadline_ms, a.lease_fd, a.resume,
                  a.resume_sha256, a.resume_bytes, a.rank, a.world_size, a.rendezvous, a.device,
                  a.backend, a.log_every, a.micro_batch_tokens, a.dist_host, a.dist_timeout_s);
}

// Binds every flag of the contract to `args`.
void AddFlags(CLI::App& app, TrainerArgs& args) {
  app.add_option(kSpec, args.spec, "RunSpec file: .pb (binary), .textpb (text) or .json")
      ->required();
  app.add_option(kEventsFd, args.events_fd,
                 "file descriptor for size-delimited TrainerEvent messages (-1: none)");
  app.add_option(kThreads, args.threads,
                 "CPU threads (0: training.threads of the spec, else all cores)");
  app.add_option(kLeaseDeadlineMs, args.lease_deadline_ms,
                 "CLOCK_MONOTONIC ms at which the attempt's lease lapses: exit 7 without "
                 "writing (0: no lease)");
  app.add_option(kLeaseFd, args.lease_fd,
                 "file descriptor of size-delimited TrainerControl messages extending the "
                 "lease (-1: none)");
  app.add_option(kResume, args.resume,
                 "checkpoint to resume from; repeat for fallbacks, newest first");
  app.add_option(kResumeSha256, args.resume_sha256,
                 "the expected SHA-256 (hex) of each --resume, in the same order (default: "
                 "each file's .sha256 sidecar)");
  app.add_option(kResumeBytes, args.resume_bytes,
                 "the recorded size of each --resume, in the same order: a file of another "
                 "size is refused unread (0 or none: any size)");
  app.add_option(kRank, args.rank, "data-parallel rank of this process, 0..world_size-1");
  app.add_option(kWorldSize, args.world_size, "data-parallel processes of the run");
  app.add_option(kRendezvous, args.rendezvous,
                 "where the ranks meet: a fresh c10d FileStore path all ranks see, or "
                 "tcp://HOST:PORT (rank 0 serves a TCPStore there)");
  app.add_option(kDevice, args.device, "cpu or cuda:N");
  app.add_option(kBackend, args.backend, "collectives: gloo (CPU) or nccl (CUDA builds)");
  app.add_option(kLogEvery, args.log_every,
                 "train/* metrics and a log line every N steps (0 = training.log_every_steps)");
  app.add_option(kMicroBatchTokens, args.micro_batch_tokens,
                 "tokens per forward/backward on each rank (0: the rank's whole share)");
  app.add_option(kDistHost, args.dist_host,
                 "address/hostname this rank's Gloo transport binds to (default: the "
                 "hostname if it resolves, else loopback)");
  app.add_option(kDistTimeoutS, args.dist_timeout_s,
                 "seconds a rank waits for the others at rendezvous and at each collective");
}

}  // namespace

std::vector<std::string> TrainerArgs::ToArgv() const {
  const TrainerArgs defaults;
  std::vector<std::string> argv = {kSpec,
                                   spec,
                                   kEventsFd,
                                   absl::StrCat(events_fd),
                                   kThreads,
                                   absl::StrCat(threads),
                                   kLeaseDeadlineMs,
                                   absl::StrCat(lease_deadline_ms),
                                   kLeaseFd,
                                   absl::StrCat(lease_fd)};
  auto add = [&argv](const char* flag, const std::string& value) {
    argv.push_back(flag);
    argv.push_back(value);
  };
  for (size_t i = 0; i < std::max({resume.size(), resume_sha256.size(), resume_bytes.size()});
       ++i) {
    if (i < resume.size()) add(kResume, resume[i]);
    if (i < resume_sha256.size()) add(kResumeSha256, resume_sha256[i]);
    if (i < resume_bytes.size()) add(kResumeBytes, absl::StrCat(resume_bytes[i]));
  }
  if (rank != defaults.rank || world_size != defaults.world_size ||
      rendezvous != defaults.rendezvous) {
    add(kRank, absl::StrCat(rank));
    add(kWorldSize, absl::StrCat(world_size));
    add(kRendezvous, rendezvous);
  }
  if (device != defaults.device) add(kDevice, device);
  if (backend != defaults.backend) add(kBackend, backend);
  if (log_every != defaults.log_every) add(kLogEvery, absl::StrCat(log_every));
  if (micro_batch_tokens != defaults.micro_batch_tokens) {
    add(kMicroBatchTokens, absl::StrCat(micro_batch_tokens));
  }
  if (dist_host != defaults.dist_host) add(kDistHost, dist_host);
  if (dist_timeout_s != defaults.dist_timeout_s) add(kDistTimeoutS, absl::StrCat(dist_timeout_s));
  return argv;
}

ParsedTrainerArgs TrainerArgs::Parse(int argc, const char* const* argv, const std::string& program,
                                     const std::string& version_extra, std::ostream& out,
                                     std::ostream& err) {
  CLI::App app{"trains one xmod run (a RunSpec) to its training-FLOP budget"};
  AddVersionFlag(app, program, version_extra);
  TrainerArgs args;
  AddFlags(app, args);
  // A command line this binary cannot parse is kExitBadFlags (another worker's binary may
  // match), not CLI11's own codes.
  if (std::optional<int> exit = ParseCommandLine(app, argc, argv, kExitBadFlags, out, err)) {
    return {std::nullopt, *exit};
  }
  for (const auto& [flag, given] : {std::pair{kResumeSha256, args.resume_sha256.size()},
                                    std::pair{kResumeBytes, args.resume_bytes.size()}}) {
    if (given != 0 && given != args.resume.size()) {
      err << program << ": " << flag << " given " << given << " times for " << args.resume.size()
          << " " << kResume << "\n";
      return {std::nullopt, kExitBadFlags};
    }
  }
  return {std::move(args), kExitOk};
}

bool TrainerArgs::operator==(const TrainerArgs& other) const {
  return Fields(*this) == Fields(other);
}

}  // namespace xmod
