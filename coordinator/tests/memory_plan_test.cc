// The memory plans of out-of-memory retries (coordinator/scheduling/memory_plan.h): the ladder
// from a submitted spec, its bounds, and what each rung says it changed.
#include "coordinator/scheduling/memory_plan.h"

#include <optional>

#include "gtest/gtest.h"

namespace xmod::scheduling {
namespace {

xmod::v1::TrainingSpec Training(int seq_len, int batch_tokens, int ranks = 0,
                                bool checkpointing = false, int micro = 0) {
  xmod::v1::TrainingSpec t;
  t.set_seq_len(seq_len);
  t.set_batch_tokens(batch_tokens);
  t.set_ranks(ranks);
  t.set_activation_checkpointing(checkpointing);
  t.set_micro_batch_tokens(micro);
  return t;
}

TEST(MemoryPlanTest, NoFailureKeepsTheSpecAsSubmitted) {
  std::optional<MemoryPlan> plan = MemoryPlanAfter(Training(64, 512, 0, true, 128), 0);
  ASSERT_TRUE(plan.has_value());
  EXPECT_TRUE(plan->activation_checkpointing);
  EXPECT_EQ(plan->micro_batch_tokens, 128);
  EXPECT_EQ(plan->description, "");
}

TEST(MemoryPlanTest, CheckpointingFirstThenHalvedMicroBatchesDownToOneWindow) {
  const xmod::v1::TrainingSpec t = Training(64, 512);
  std::optional<MemoryPlan> plan = MemoryPlanAfter(t, 1);
  ASSERT_TRUE(plan.has_value());
  EXPECT_TRUE(plan->activation_checkpointing);
  EXPECT_EQ(plan->micro_batch_tokens, 0);  // still the whole share
  EXPECT_EQ(plan->description, "activation checkpointing (after 1 out-of-memory failure)");
  for (int failures : {2, 3, 4}) {
    plan = MemoryPlanAfter(t, failures);
    ASSERT_TRUE(plan.has_value()) << failures;
    EXPECT_TRUE(plan->activation_checkpointing);
    EXPECT_EQ(plan->micro_batch_tokens, 512 >> (failures - 1)) << failures;
  }
  EXPECT_EQ(MemoryPlanAfter(t, 4)->description,
            "activation checkpointing, micro-batches of 64 tokens (after 4 out-of-memory "
            "failures)");
  EXPECT_FALSE(MemoryPlanAfter(t, 5).has_value());  // one window is the last rung
}

TEST(MemoryPlanTest, RungsTheSpecAlreadyHasAreSkipped) {
  const xmod::v1::TrainingSpec t = Training(64, 512, 0, /*checkpointing=*/true, /*micro=*/128);
  std::optional<MemoryPlan> plan = MemoryPlanAfter(t, 1);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->micro_batch_tokens, 64);
  EXPECT_EQ(plan->description, "micro-batches of 64 tokens (after 1 out-of-memory failure)");
  EXPECT_FALSE(MemoryPlanAfter(t, 2).has_value());
}

TEST(MemoryPlanTest, MicroBatchesHalveEachRanksShareInWholeWindows) {
  // Two ranks share 512 tokens: 256 each, then 128.
  EXPECT_EQ(MemoryPlanAfter(Training(64, 512, 2), 2)->micro_batch_tokens, 128);
  // Three windows of 16: half is 24 tokens, cut to one whole window; then nothing is left.
  const xmod::v1::TrainingSpec odd = Training(16, 48);
  EXPECT_EQ(MemoryPlanAfter(odd, 2)->micro_batch_tokens, 16);
  EXPECT_FALSE(MemoryPlanAfter(odd, 3).has_value());
}

TEST(MemoryPlanTest, ApplyingAPlanSetsBothFields) {
  xmod::v1::TrainingSpec t = Training(64, 512);
  ApplyMemoryPlan(*MemoryPlanAfter(t, 3), &t);
  EXPECT_TRUE(t.activation_checkpointing());
  EXPECT_EQ(t.micro_batch_tokens(), 128);
  EXPECT_EQ(t.batch_tokens(), 512);  // the step is the same
}

}  // namespace
}  // namespace xmod::scheduling
