// Warmup + cosine learning-rate schedule.
#include "model/train/schedule.h"

#include <algorithm>
#include <cmath>

namespace xmod {

LrSchedule::LrSchedule(int64_t total_steps, double warmup_fraction, double min_lr_ratio)
    : total_steps_(std::max<int64_t>(1, total_steps)),
      warmup_steps_(std::min<int64_t>(
          total_steps_ - 1,
          static_cast<int64_t>(std::ceil(std::max(0.0, warmup_fraction) * total_steps_)))),
      min_lr_ratio_(std::clamp(min_lr_ratio, 0.0, 1.0)) {
  warmup_steps_ = std::max<int64_t>(0, warmup_steps_);
}

double LrSchedule::Multiplier(int64_t step) const {
  if (step < warmup_steps_) {
    return static_cast<double>(step + 1) / static_cast<double>(warmup_steps_);
  }
  // The decay runs over steps [warmup_steps, total_steps - 1].
  const int64_t decay_steps = total_steps_ - 1 - warmup_steps_;
  if (decay_steps <= 0) return 1.0;
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup_steps_) / static_cast<double>(decay_steps));
  return min_lr_ratio_ + (1.0 - min_lr_ratio_) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace xmod
