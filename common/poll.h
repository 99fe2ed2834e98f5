// Waiting with a deadline for a state another thread or process brings about, as tests do
// instead of sleeping: PollUntil asks `done` every `every` until it holds or `timeout` has
// passed. Thread-compatible.
#ifndef XMOD_COMMON_POLL_H_
#define XMOD_COMMON_POLL_H_

#include <functional>

#include "absl/time/time.h"

namespace xmod {

// True once `done()` holds; false if it still does not after `timeout`.
bool PollUntil(const std::function<bool()>& done, absl::Duration timeout,
               absl::Duration every = absl::Milliseconds(5));

}  // namespace xmod

#endif  // XMOD_COMMON_POLL_H_
