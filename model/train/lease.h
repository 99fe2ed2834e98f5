// Lease: the trainer's side of attempt fencing.
//
// A run's attempt holds a lease at the coordinator that its worker renews with heartbeats.
// Once the lease can no longer have been renewed, the coordinator may hand the run to
// another worker, so this trainer must stop without writing anything — even when its worker
// is frozen (SIGSTOP) or dead and cannot tell it. The worker therefore gives the trainer a
// deadline, and the trainer enforces it itself:
//
//   worker ──(--lease_deadline_ms at start)──────────────────────▶ trainer
//          ──(TrainerControl{lease_deadline_ms} on --lease_fd     │ watchdog thread: at the
//             after each successful heartbeat)───────────────────▶│ deadline, _exit(7)
//                                                                 │ ExitIfLeaseLapsed(): before
//                                                                 │ each checkpoint write and
//                                                                 │ after each step
//
// Deadlines are CLOCK_MONOTONIC milliseconds: a worker and its trainers share a host, so
// they read the same clock, and a deadline is absolute, so a message delayed by a frozen
// worker can never extend the lease past the time it was computed for. A deadline only moves
// forward. End of file on the control descriptor (the worker died) leaves the deadline as it
// is: nobody can extend it any more.
//
// The watchdog ends the process with _exit(kExitLeaseExpired) (trainer_contract/exit_codes.h):
// no destructors, no buffered writes, no rename, so a checkpoint being written at that moment
// stays an unnamed temporary file. A step, an evaluation or a checkpoint write can take long,
// which is why a thread, not only the checks between steps, enforces the deadline.
//
// Thread-safety: LeaseWatchdog is thread-safe; the process-wide functions may be called from
// any thread once InstallLease returned.
#ifndef XMOD_MODEL_TRAIN_LEASE_H_
#define XMOD_MODEL_TRAIN_LEASE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace xmod {

// CLOCK_MONOTONIC in milliseconds: the clock of every lease deadline.
int64_t MonotonicNowMillis();

class LeaseWatchdog {
 public:
  // Watches `deadline_ms` (on `now_ms`), extended by TrainerControl messages read from
  // `control_fd` (-1: none; the watchdog does not own it). `on_lapse` runs once, on the
  // watchdog thread, with the deadline that passed.
  LeaseWatchdog(int64_t deadline_ms, int control_fd, std::function<int64_t()> now_ms,
                std::function<void(int64_t deadline_ms)> on_lapse);
  // Stops the thread (if the lease had not lapsed yet, on_lapse never runs).
  ~LeaseWatchdog();
  LeaseWatchdog(const LeaseWatchdog&) = delete;
  LeaseWatchdog& operator=(const LeaseWatchdog&) = delete;

  int64_t deadline_ms() const;
  // Whether the deadline has passed.
  bool Lapsed() const;

 private:
  void Run();
  // Parses the complete messages at the front of buffer_ and moves the deadline forward.
  void ConsumeMessages();

  const int control_fd_;
  const std::function<int64_t()> now_ms_;
  const std::function<void(int64_t)> on_lapse_;
  int wake_[2] = {-1, -1};  // self-pipe: the destructor wakes the thread
  std::string buffer_;      // partial control messages, watchdog thread only
  mutable absl::Mutex mu_;
  int64_t deadline_ms_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// The process's lease: a watchdog that writes the reason to stderr and _exit()s with
// kExitLeaseExpired when `deadline_ms` passes. Call at most once, from main().
void InstallLease(int64_t deadline_ms, int control_fd);

// Without an installed lease: nothing. With one whose deadline has passed: the same exit as
// the watchdog's, now. Call before anything is written that a newer attempt might rely on.
void ExitIfLeaseLapsed();

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_LEASE_H_
