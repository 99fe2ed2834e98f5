// Tests of training defaults, field validation and budget -> steps.
#include "model/train/training_config.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

// The fields without a default: 4 windows of 16 tokens a step, 1e9 FLOPs.
xmod::v1::TrainingSpec MinimalTraining() {
  xmod::v1::TrainingSpec t;
  t.set_seq_len(16);
  t.set_batch_tokens(64);
  t.set_flop_budget(1e9);
  return t;
}

TEST(ResolveTrainingTest, DefaultsAndFieldErrors) {
  xmod::v1::TrainingSpec t = MinimalTraining();
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

TEST(ResolveTrainingTest, GpuStepDefaultsAndErrors) {
  xmod::v1::TrainingSpec t = MinimalTraining();
  absl::StatusOr<xmod::v1::TrainingSpec> r = ResolveTraining(t);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->precision(), "auto");
  EXPECT_EQ(r->attention(), "auto");
  EXPECT_EQ(r->cuda_graphs(), "auto");
  EXPECT_TRUE(r->overlap_grad_reduce());
  EXPECT_FALSE(r->activation_checkpointing());
  EXPECT_EQ(r->log_every_steps(), 10);
  for (auto [field, mutate] :
       std::vector<std::pair<std::string, std::function<void(xmod::v1::TrainingSpec&)>>>{
           {"training.precision", [](auto& s) { s.set_precision("fp16"); }},
           {"training.attention", [](auto& s) { s.set_attention("flash"); }},
           {"training.cuda_graphs", [](auto& s) { s.set_cuda_graphs("yes"); }},
           {"training.micro_batch_tokens", [](auto& s) { s.set_micro_batch_tokens(24); }},
           {"training.log_every_steps", [](auto& s) { s.set_log_every_steps(-1); }}}) {
    xmod::v1::TrainingSpec bad = t;
    mutate(bad);
    EXPECT_THAT(ResolveTraining(bad).status().message(), HasSubstr(field));
  }
}

}  // namespace
}  // namespace xmod
