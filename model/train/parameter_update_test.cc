// ParameterUpdate is the update the trainer and bench_model both run: which optimizer holds
// which parameters under each training.optimizer, and one Step against clipping, Muon and
// AdamW called by hand at the schedule's learning rates.
#include "model/train/parameter_update.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/accounting/accounting.h"
#include "model/test_specs.h"
#include "model/train/grad_clip.h"

namespace xmod {
namespace {

constexpr int kSeqLen = 16;

Transformer Build() {
  const xmod::v1::ModelSpec spec = TinySpec(xmod::v1::XMOD, /*k=*/4, /*a=*/1);
  absl::StatusOr<Accounting> acc = Account(spec, kSeqLen);
  EXPECT_TRUE(acc.ok()) << acc.status();
  torch::manual_seed(3);
  return Transformer(spec, *acc, kSeqLen);
}

xmod::v1::TrainingSpec Training(const std::string& optimizer) {
  xmod::v1::TrainingSpec training;
  training.set_optimizer(optimizer);
  training.set_lr(0.02);
  training.set_adamw_lr(0.003);
  training.set_weight_decay(0.1);
  training.set_grad_clip(0.5);
  return training;
}

// Gives every parameter the same pseudo-random gradient in each model.
void SetGradients(Transformer& model) {
  torch::manual_seed(11);
  for (torch::Tensor& p : model->parameters()) p.mutable_grad() = torch::randn_like(p);
}

TEST(ParameterUpdateTest, MuonTakesTheMatricesAndAdamWTheRest) {
  Transformer model = Build();
  ParameterUpdate update(model, Training("muon"), AutocastState{});
  EXPECT_EQ(update.muon().params().size(), model->MuonParameters().size());
  EXPECT_EQ(update.adamw().params().size(), model->AdamWParameters().size());
  EXPECT_GT(update.muon().params().size(), 0u);
}

TEST(ParameterUpdateTest, AdamWAloneTakesEveryParameter) {
  Transformer model = Build();
  ParameterUpdate update(model, Training("adamw"), AutocastState{});
  EXPECT_TRUE(update.muon().params().empty());
  EXPECT_EQ(update.adamw().params().size(), model->parameters().size());
}

TEST(ParameterUpdateTest, StepClipsThenRunsBothOptimizersAtTheScaledRates) {
  constexpr double kMultiplier = 0.25;
  const xmod::v1::TrainingSpec training = Training("muon");
  Transformer model = Build(), by_hand = Build();
  ParameterUpdate update(model, training, AutocastState{});
  MuonOptions muon_options;
  muon_options.weight_decay = training.weight_decay();
  Muon muon(by_hand->MuonParameters(), muon_options);
  AdamW adamw(by_hand->AdamWParameters(), AdamWOptions{0.9, 0.95, 1e-8, training.weight_decay()});
  for (int step = 0; step < 2; ++step) {
    SetGradients(model);
    SetGradients(by_hand);
    update.Step(kMultiplier);
    ClipGradNorm(by_hand->parameters(), training.grad_clip());
    muon.Step(training.lr() * kMultiplier);
    adamw.Step(training.adamw_lr() * kMultiplier);
  }
  const std::vector<torch::Tensor> got = model->parameters(), want = by_hand->parameters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(torch::equal(got[i], want[i])) << "parameter " << i;
  }
  // The update moved the weights: a Step that did nothing would also match by hand's copy.
  EXPECT_FALSE(torch::equal(model->parameters()[0], Build()->parameters()[0]));
}

}  // namespace
}  // namespace xmod
