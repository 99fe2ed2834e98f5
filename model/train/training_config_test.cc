// Tests of training defaults, field validation and budget -> steps.
#include "model/train/training_config.h"

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

TEST(ResolveTrainingTest, DefaultsAndFieldErrors) {
  xmod::v1::TrainingSpec t;
  t.set_seq_len(16);
  t.set_batch_tokens(64);
  t.set_flop_budget(1e9);
  absl::StatusOr<xmod::v1::TrainingSpec> r = ResolveTraining(t);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->optimizer(), "muon");
  EXPECT_DOUBLE_EQ(r->lr(), 3.2e-3);
  EXPECT_DOUBLE_EQ(r->adamw_lr(), 3.2e-3);
  EXPECT_EQ(r->eval_marks(), 8);
  EXPECT_EQ(r->eval_tokens(), 64);
  t.set_batch_tokens(40);
  EXPECT_THAT(ResolveTraining(t).status().message(), HasSubstr("training.batch_tokens"));
  t.set_batch_tokens(64);
  t.set_optimizer("sgd");
  EXPECT_THAT(ResolveTraining(t).status().message(), HasSubstr("training.optimizer"));
}

}  // namespace
}  // namespace xmod
