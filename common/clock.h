// Clock: injected time, so lease, heartbeat and retry logic is tested without sleeping
// (leveldb's Env, Envoy's TimeSource). Two readings: the wall clock (NowMillis), only for
// timestamps that are stored or shown, and a monotonic clock (MonotonicMillis), for every
// deadline, lease, timeout and backoff, so that a wall-clock step (NTP, an operator) neither
// expires nor prolongs anything. Thread-safe.
#ifndef XMOD_COMMON_CLOCK_H_
#define XMOD_COMMON_CLOCK_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"

namespace xmod {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch (wall clock: may jump).
  virtual int64_t NowMillis() = 0;
  // Milliseconds since an arbitrary origin fixed for the process; never goes back and does
  // not follow wall-clock steps. Only differences of two readings mean anything.
  virtual int64_t MonotonicMillis() = 0;
  // The process-wide real clock (CLOCK_REALTIME and CLOCK_MONOTONIC).
  static Clock* Real();
};

// A clock that moves only when told to. For tests.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_millis = 1'700'000'000'000) : now_(start_millis) {}
  int64_t NowMillis() override;
  int64_t MonotonicMillis() override;
  // Moves both readings forward by `millis`.
  void Advance(int64_t millis);
  // Steps the wall clock alone (either way), as NTP or an operator would.
  void StepWall(int64_t millis);

 private:
  absl::Mutex mu_;
  int64_t now_ ABSL_GUARDED_BY(mu_);
  int64_t monotonic_ ABSL_GUARDED_BY(mu_) = 1'000'000;
};

}  // namespace xmod

#endif  // XMOD_COMMON_CLOCK_H_
