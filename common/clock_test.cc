#include "common/clock.h"

#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(FakeClockTest, MovesOnlyWhenAdvanced) {
  FakeClock clock(1000);
  EXPECT_EQ(clock.NowMillis(), 1000);
  clock.Advance(250);
  EXPECT_EQ(clock.NowMillis(), 1250);
}

TEST(FakeClockTest, AWallStepLeavesTheMonotonicReadingAlone) {
  FakeClock clock(1000);
  const int64_t start = clock.MonotonicMillis();
  clock.StepWall(-500);
  EXPECT_EQ(clock.NowMillis(), 500);
  EXPECT_EQ(clock.MonotonicMillis(), start);
  clock.Advance(20);
  EXPECT_EQ(clock.MonotonicMillis(), start + 20);
}

TEST(RealClockTest, MonotonicNeverGoesBack) {
  const int64_t first = Clock::Real()->MonotonicMillis();
  EXPECT_GE(Clock::Real()->MonotonicMillis(), first);
}

TEST(RealClockTest, IsAfter2020) { EXPECT_GT(Clock::Real()->NowMillis(), 1'577'836'800'000); }

}  // namespace
}  // namespace xmod
