// See poll.h.
#include "common/poll.h"

#include "absl/time/clock.h"

namespace xmod {

bool PollUntil(const std::function<bool()>& done, absl::Duration timeout, absl::Duration every) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(every);
  }
  return true;
}

}  // namespace xmod
