// Clock: injected time, so lease, heartbeat and retry logic is tested without sleeping
// (leveldb's Env, Envoy's TimeSource). Thread-safe.
#ifndef XMOD_COMMON_CLOCK_H_
#define XMOD_COMMON_CLOCK_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"

namespace xmod {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch.
  virtual int64_t NowMillis() = 0;
  // The process-wide wall clock.
  static Clock* Real();
};

// A clock that moves only when told to. For tests.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_millis = 1'700'000'000'000) : now_(start_millis) {}
  int64_t NowMillis() override;
  void Advance(int64_t millis);

 private:
  absl::Mutex mu_;
  int64_t now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xmod

#endif  // XMOD_COMMON_CLOCK_H_
