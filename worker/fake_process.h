// Test doubles for process_supervisor.h: a launcher whose children are scripted from the
// test (events, exit, reaction to signals) instead of being real processes. Lets agent tests
// make a child fail, ignore SIGTERM, or vanish, without timing.
//
// Thread-safety: every method is thread-safe; a FakeChild may be driven from the test thread
// while the agent reads it from its own threads.
#ifndef XMOD_WORKER_FAKE_PROCESS_H_
#define XMOD_WORKER_FAKE_PROCESS_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/process_supervisor.h"

namespace xmod {

// The state of one scripted child, shared by the test and the ChildProcess handed out.
class FakeChild {
 public:
  explicit FakeChild(LaunchOptions options, int pid);

  const LaunchOptions& options() const { return options_; }
  int pid() const { return pid_; }

  // Queues an event for the reader.
  void Emit(const v1::TrainerEvent& event);
  void EmitMetric(int64_t step, const std::string& name, double value);
  void EmitCheckpoint(int64_t step, const std::string& path);
  // Ends the event stream and the process with `code` (or `signal`), after writing
  // `stderr_text` to its stderr.
  void Exit(int code, const std::string& stderr_text = "");
  void Kill(int signal);

  // What happens when the agent signals the child. Default: the signal kills it.
  void set_on_signal(std::function<void(FakeChild&, int)> on_signal);
  std::vector<int> signals() const;
  // Every lease deadline the agent sent (ExtendLease), in order.
  std::vector<int64_t> lease_deadlines() const;
  bool exited() const;

  // The ChildProcess side.
  absl::StatusOr<bool> ReadEvent(v1::TrainerEvent* event);
  ExitStatus Wait();
  std::optional<ExitStatus> Poll();
  void Signal(int signo);
  std::string StderrTail();
  void ExtendLease(int64_t deadline_ms);

 private:
  void EndLocked(ExitStatus status, const std::string& stderr_text)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LaunchOptions options_;
  const int pid_;
  mutable absl::Mutex mu_;
  std::deque<v1::TrainerEvent> events_ ABSL_GUARDED_BY(mu_);
  bool events_closed_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<ExitStatus> exit_ ABSL_GUARDED_BY(mu_);
  std::string stderr_ ABSL_GUARDED_BY(mu_);
  std::vector<int> signals_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> lease_deadlines_ ABSL_GUARDED_BY(mu_);
  std::function<void(FakeChild&, int)> on_signal_ ABSL_GUARDED_BY(mu_);
};

class FakeLauncher : public ProcessLauncher {
 public:
  absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const LaunchOptions& options) override;

  // The next Start fails with `status`.
  void FailNextStart(absl::Status status);
  // Called with each new child before Start returns (e.g. to set its on_signal).
  void set_on_start(std::function<void(FakeChild&)> on_start);
  // The index-th child started, waiting up to `timeout` for it; null on timeout.
  std::shared_ptr<FakeChild> WaitForChild(size_t index, absl::Duration timeout = absl::Seconds(30));
  size_t started() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<FakeChild>> children_ ABSL_GUARDED_BY(mu_);
  absl::Status next_error_ ABSL_GUARDED_BY(mu_);
  std::function<void(FakeChild&)> on_start_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xmod

#endif  // XMOD_WORKER_FAKE_PROCESS_H_
