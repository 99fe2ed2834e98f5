#include "common/clock.h"

#include "absl/time/clock.h"

namespace xmod {
namespace {

class RealClock : public Clock {
 public:
  int64_t NowMillis() override { return absl::ToUnixMillis(absl::Now()); }
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

void FakeClock::Advance(int64_t millis) {
  absl::MutexLock lock(&mu_);
  now_ += millis;
}

}  // namespace xmod
