// Process supervisor: starts xmod-train children and watches them (the worker <-> trainer
// contract, docs/worker-trainer-contract.md and trainer_contract/). A child gets its argv,
// extra environment (thread counts, CUDA_VISIBLE_DEVICES), its stdout and stderr appended to a
// per-attempt log file, and the write end of a pipe at a fixed descriptor number on which it
// streams size-delimited xmod.v1.TrainerEvent messages (trainer_contract/event_stream.h).
// Optionally a control channel the other way (a SOCK_SEQPACKET socket at another fixed descriptor
// number) carries xmod.v1.TrainerControl lease deadlines to the child (fencing,
// model/train/lease.h). Each child leads its own process group, so signals reach whatever it
// spawned too.
//
// Behind the ProcessLauncher / ChildProcess interfaces so that tests can script children
// (fake_process.h) and make a worker "lose" one (STYLE.md, "Injected time and OS").
//
// Thread-safety: ProcessLauncher::Start may be called from any thread. A ChildProcess is
// read (ReadEvent) by one thread; Wait, Poll, Signal and StderrTail may be called from any
// threads concurrently.
#ifndef XMOD_WORKER_PROCESS_SUPERVISOR_H_
#define XMOD_WORKER_PROCESS_SUPERVISOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "xmod/v1/trainer.pb.h"

namespace xmod {

struct LaunchOptions {
  // argv[0] is the program's path, executed as is (no PATH search).
  std::vector<std::string> argv;
  // Variables set (or replaced) on top of the worker's own environment.
  std::vector<std::pair<std::string, std::string>> env;
  // The child's stdout and stderr are appended here (created if missing).
  std::string log_path;
  // Descriptor number at which the child finds the write end of the event pipe.
  int events_fd = 3;
  // Descriptor number at which the child reads TrainerControl messages (ExtendLease);
  // -1: no control channel. Must differ from events_fd.
  int control_fd = -1;
};

// How a child ended.
struct ExitStatus {
  int code = 0;    // exit code if it exited
  int signal = 0;  // terminating signal if it was killed (then code is 0)

  bool success() const { return signal == 0 && code == 0; }
  // Shell convention: the exit code, or 128 + signal.
  int AsExitCode() const { return signal != 0 ? 128 + signal : code; }
  std::string ToString() const;
};

class ChildProcess {
 public:
  virtual ~ChildProcess() = default;

  virtual int pid() const = 0;

  // Blocks until the next event arrives. true with `*event` filled; false at the end of the
  // stream (the child closed the pipe or exited). DATA_LOSS when the stream ends inside a
  // message or holds something that is not a TrainerEvent; the stream is over then too.
  virtual absl::StatusOr<bool> ReadEvent(v1::TrainerEvent* event) = 0;

  // Blocks until the child has exited and returns how. Idempotent.
  virtual ExitStatus Wait() = 0;

  // The exit status if the child has exited, without blocking.
  virtual std::optional<ExitStatus> Poll() = 0;

  // Sends `signo` (SIGTERM, SIGKILL) to the child's process group; nothing once it exited.
  virtual void Signal(int signo) = 0;

  // Tells the child its lease now lapses at `deadline_ms` (CLOCK_MONOTONIC milliseconds,
  // the clock of Clock::Real()->MonotonicMillis()) with a TrainerControl message. Never
  // blocks; nothing without a control channel, once the child exited, or when the child
  // has stopped reading (it keeps the deadline it last read, the safe side).
  virtual void ExtendLease(int64_t deadline_ms) = 0;

  // The last ~4 KB the child wrote to stderr; complete once Wait() returned.
  virtual std::string StderrTail() = 0;
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // Starts a child. The caller owns it; destroying a running child kills its group.
  virtual absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const LaunchOptions& options) = 0;
};

// fork/exec on POSIX. The child's signal mask is cleared and stdin is /dev/null.
// An argv[0] that cannot be executed shows as exit code 127 with the reason on stderr.
std::unique_ptr<ProcessLauncher> NewPosixLauncher();

// Bytes of stderr a child keeps for its error text.
inline constexpr size_t kStderrTailBytes = 4096;

}  // namespace xmod

#endif  // XMOD_WORKER_PROCESS_SUPERVISOR_H_
