// Tests of the warmup + cosine learning-rate schedule.
#include "model/train/schedule.h"

#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(LrScheduleTest, WarmsUpLinearlyThenDecaysToTheFloorAtTheLastStep) {
  LrSchedule schedule(/*total_steps=*/100, /*warmup_fraction=*/0.1, /*min_lr_ratio=*/0.1);
  EXPECT_EQ(schedule.warmup_steps(), 10);
  EXPECT_DOUBLE_EQ(schedule.Multiplier(0), 0.1);
  EXPECT_DOUBLE_EQ(schedule.Multiplier(4), 0.5);
  EXPECT_DOUBLE_EQ(schedule.Multiplier(9), 1.0);
  EXPECT_DOUBLE_EQ(schedule.Multiplier(10), 1.0);               // decay starts at the peak
  EXPECT_NEAR(schedule.Multiplier(10 + 89 / 2.0), 0.55, 1e-2);  // halfway: (1 + 0.1) / 2
  EXPECT_DOUBLE_EQ(schedule.Multiplier(99), 0.1);
  EXPECT_DOUBLE_EQ(schedule.Multiplier(150), 0.1);
}

TEST(LrScheduleTest, DecayIsMonotone) {
  LrSchedule schedule(50, 0.02, 0.0);
  for (int s = schedule.warmup_steps() + 1; s < 50; ++s) {
    EXPECT_LE(schedule.Multiplier(s), schedule.Multiplier(s - 1)) << s;
  }
  EXPECT_DOUBLE_EQ(schedule.Multiplier(49), 0.0);
}

TEST(LrScheduleTest, DegenerateLengths) {
  LrSchedule one(1, 0.5, 0.1);  // a single step: no warmup, peak rate
  EXPECT_EQ(one.warmup_steps(), 0);
  EXPECT_DOUBLE_EQ(one.Multiplier(0), 1.0);
  LrSchedule two(2, 0.0, 0.1);
  EXPECT_DOUBLE_EQ(two.Multiplier(0), 1.0);
  EXPECT_DOUBLE_EQ(two.Multiplier(1), 0.1);
}

}  // namespace
}  // namespace xmod
