// Tests of AdamW: identical to torch::optim::AdamW on matrices; no decay on vectors.
#include "model/train/adamw.h"

#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(AdamWTest, MatchesTorchAdamWBitForBit) {
  torch::manual_seed(0);
  torch::Tensor init = torch::randn({6, 5});
  torch::Tensor ours = init.clone().requires_grad_(true);
  torch::Tensor theirs = init.clone().requires_grad_(true);
  AdamW adamw({ours}, AdamWOptions{0.9, 0.95, 1e-8, 0.1});
  torch::optim::AdamW reference(
      {theirs}, torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  for (int step = 0; step < 5; ++step) {
    torch::Tensor g = torch::randn({6, 5});
    ours.mutable_grad() = g.clone();
    theirs.mutable_grad() = g.clone();
    adamw.Step(3e-3);
    reference.step();
  }
  EXPECT_TRUE(torch::equal(ours, theirs));
  EXPECT_EQ(adamw.steps(), 5);
}

// The form a recorded step runs, with the step's numbers read from device tensors, computes
// what Step computes, bit for bit, for matrices and vectors alike.
TEST(AdamWTest, StepOnDeviceMatchesStepBitForBit) {
  torch::manual_seed(2);
  std::vector<torch::Tensor> ours, theirs;
  for (auto shape : {std::vector<int64_t>{6, 5}, {7}}) {
    torch::Tensor init = torch::randn(shape);
    ours.push_back(init.clone().requires_grad_(true));
    theirs.push_back(init.clone().requires_grad_(true));
  }
  AdamW eager(ours, AdamWOptions{0.9, 0.95, 1e-8, 0.1});
  AdamW on_device(theirs, AdamWOptions{0.9, 0.95, 1e-8, 0.1});
  auto scalar = [](double v) { return torch::tensor(v, torch::kFloat64); };
  for (int step = 0; step < 5; ++step) {
    const double lr = 3e-3 * (1.0 - 0.15 * step);
    for (size_t i = 0; i < ours.size(); ++i) {
      torch::Tensor g = torch::randn_like(ours[i]);
      ours[i].mutable_grad() = g.clone();
      theirs[i].mutable_grad() = g.clone();
    }
    eager.Step(lr);
    const AdamW::DeviceScalars k = on_device.Advance(lr);
    on_device.StepOnDevice(scalar(k.decay), scalar(k.step), scalar(k.sqrt_bias2));
  }
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_TRUE(torch::equal(ours[i], theirs[i])) << i;
  EXPECT_EQ(on_device.steps(), 5);
}

TEST(AdamWTest, VectorsAreNotDecayed) {
  torch::Tensor norm = torch::ones({4}).requires_grad_(true);
  AdamW adamw({norm}, AdamWOptions{0.9, 0.95, 1e-8, 0.5});
  norm.mutable_grad() = torch::zeros({4});
  adamw.Step(0.1);
  EXPECT_TRUE(torch::equal(norm.detach(), torch::ones({4})));
}

}  // namespace
}  // namespace xmod
