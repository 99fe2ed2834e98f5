// Learning-rate schedule of a run: linear warmup over the first warmup_fraction of the
// optimizer steps, then cosine decay to min_lr_ratio x peak at the last step (paper B.1
// trains with a peak rate from Table 5; warmup and decay shape are our choices, configurable
// through TrainingSpec). The schedule is a pure function of the step, so a resumed run
// recomputes its rate instead of restoring it (the rate is not part of the checkpoint). Thread-safe (immutable).
#ifndef XMOD_MODEL_TRAIN_SCHEDULE_H_
#define XMOD_MODEL_TRAIN_SCHEDULE_H_

#include <cstdint>

namespace xmod {

class LrSchedule {
 public:
  // `total_steps` >= 1; `warmup_fraction` in [0, 1); `min_lr_ratio` in [0, 1].
  LrSchedule(int64_t total_steps, double warmup_fraction, double min_lr_ratio);

  // Multiplier of the peak rate for the optimizer step with 0-based index `step`
  // (the step that moves the count from `step` to `step + 1`). Rises linearly to 1 over
  // the warmup steps (first step: 1 / warmup_steps), then follows a half cosine from 1 to
  // min_lr_ratio, reached exactly at the last step. Steps past the end stay at
  // min_lr_ratio.
  double Multiplier(int64_t step) const;

  int64_t warmup_steps() const { return warmup_steps_; }
  int64_t total_steps() const { return total_steps_; }

 private:
  int64_t total_steps_;
  int64_t warmup_steps_;
  double min_lr_ratio_;
};

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_SCHEDULE_H_
