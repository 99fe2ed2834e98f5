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

TEST(RealClockTest, IsAfter2020) { EXPECT_GT(Clock::Real()->NowMillis(), 1'577'836'800'000); }

}  // namespace
}  // namespace xmod
