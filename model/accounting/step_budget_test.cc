// PlannedSteps (step_budget.h): whole steps, and a budget below one step refused by name.
#include "model/accounting/step_budget.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

TEST(PlannedStepsTest, FloorOfBudgetOverStepCost) {
  EXPECT_EQ(*PlannedSteps(1000, 10, 10), 10);
  EXPECT_EQ(*PlannedSteps(1099, 10, 10), 10);
  EXPECT_EQ(*PlannedSteps(100, 10, 10), 1);
  absl::StatusOr<int64_t> too_small = PlannedSteps(99, 10, 10);
  EXPECT_EQ(too_small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_small.status().message(),
              HasSubstr("training.flop_budget: 99 FLOPs is too small for one step of 100 FLOPs"));
}

}  // namespace
}  // namespace xmod
