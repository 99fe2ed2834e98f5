#include "common/clock.h"

#include <chrono>

#include "absl/time/clock.h"

namespace xmod {
namespace {

class RealClock : public Clock {
 public:
  int64_t NowMillis() override { return absl::ToUnixMillis(absl::Now()); }
  int64_t MonotonicMillis() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

Clock* Clock::Real() {
  static RealClock* clock = new RealClock;
  return clock;
}

int64_t FakeClock::NowMillis() {
  absl::MutexLock lock(&mu_);
  return now_;
}

int64_t FakeClock::MonotonicMillis() {
  absl::MutexLock lock(&mu_);
  return monotonic_;
}

void FakeClock::Advance(int64_t millis) {
  absl::MutexLock lock(&mu_);
  now_ += millis;
  monotonic_ += millis;
}

void FakeClock::StepWall(int64_t millis) {
  absl::MutexLock lock(&mu_);
  now_ += millis;
}

}  // namespace xmod
