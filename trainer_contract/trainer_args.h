// TrainerArgs: the command line of a trainer process (docs/worker-trainer-contract.md,
// "Command line") — what xmod-worker passes to xmod-train for one rank of one attempt, and what
// xmod-train and the fake trainer parse. The flag names live in trainer_args.cc and nowhere
// else in C++; clients/python/tests/fake_trainer.py reads the same argv as "--flag value"
// pairs, which is the only form ToArgv writes. LibTorch-free; thread-compatible.
#ifndef XMOD_TRAINER_CONTRACT_TRAINER_ARGS_H_
#define XMOD_TRAINER_CONTRACT_TRAINER_ARGS_H_

#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace xmod {

struct ParsedTrainerArgs;

struct TrainerArgs {
  // Given by the worker to every trainer.
  std::string spec;               // --spec: the RunSpec file (.pb, .textpb/.txtpb/.pbtxt, .json)
  int events_fd = -1;             // --events_fd: TrainerEvent stream; -1 = none (ranks > 0)
  int threads = 0;                // --threads: CPU threads; 0 = training.threads, else all cores
  int64_t lease_deadline_ms = 0;  // --lease_deadline_ms: CLOCK_MONOTONIC ms; 0 = no lease
  int lease_fd = -1;              // --lease_fd: TrainerControl stream; -1 = none
  // Given when there is something to say.
  std::vector<std::string> resume;         // --resume (repeated): candidates, newest first
  std::vector<std::string> resume_sha256;  // --resume_sha256: each one's digest, or none
  std::vector<int64_t> resume_bytes;       // --resume_bytes: each one's size (0: unknown), or none
  int rank = 0;                            // --rank: 0 .. world_size - 1
  int world_size = 1;                      // --world_size: data-parallel processes
  std::string rendezvous;                  // --rendezvous: FileStore path or tcp://HOST:PORT
  std::string device = "cpu";              // --device: cpu or cuda:N
  std::string backend = "gloo";            // --backend: gloo or nccl
  // For running by hand.
  int log_every = 0;               // --log_every: 0 = training.log_every_steps
  int64_t micro_batch_tokens = 0;  // --micro_batch_tokens: 0 = the rank's whole share
  std::string dist_host;           // --dist_host: "" = the hostname if it resolves, else loopback
  int dist_timeout_s = 300;        // --dist_timeout_s: rendezvous and each collective

  // The arguments after argv[0], each flag and its value as two words: --spec,
  // --events_fd, --threads, --lease_deadline_ms and --lease_fd always, in that order; then
  // --resume (each followed by its --resume_sha256 and --resume_bytes if there are ones); --rank,
  // --world_size and
  // --rendezvous when any of them is not the default; then --device, --backend, --log_every,
  // --micro_batch_tokens, --dist_host and --dist_timeout_s each when not the default.
  std::vector<std::string> ToArgv() const;

  // Parses a trainer's command line (argv[0] is the program). `program` names it in --help,
  // --version (VersionLine(program, version_extra)) and errors. The arguments, or the code to
  // exit with at once: kExitOk after --help or --version (printed on `out`), kExitBadFlags
  // after an unknown flag, a malformed value, a missing --spec or a --resume_sha256 or
  // --resume_bytes count that is neither 0 nor the --resume count (one line naming the flag on
  // `err`).
  static ParsedTrainerArgs Parse(int argc, const char* const* argv,
                                 const std::string& program = "xmod-train",
                                 const std::string& version_extra = "",
                                 std::ostream& out = std::cout, std::ostream& err = std::cerr);

  bool operator==(const TrainerArgs& other) const;
};

struct ParsedTrainerArgs {
  std::optional<TrainerArgs> args;  // set: run with these
  int exit_code = 0;                // otherwise: exit with this now
};

}  // namespace xmod

#endif  // XMOD_TRAINER_CONTRACT_TRAINER_ARGS_H_
