// model/cpu/loss.h against the composite formula (log_softmax, gather, mean) and the gradient
// autograd takes through it, in float64, in float32 and bfloat16 logits against float64 on the
// same values, over vocabularies below, at and above the vector widths; the refusals of
// targets outside the vocabulary; and one and two threads agreeing bit for bit.
#include "model/cpu/loss.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "model/cpu/kernels.h"

namespace xmod::cpu {
namespace {

// {loss, dloss/dlogits for grad} of the composite formula in float64.
std::pair<torch::Tensor, torch::Tensor> Composite(const torch::Tensor& logits,
                                                  const torch::Tensor& targets, double grad) {
  torch::Tensor x = logits.to(torch::kDouble).requires_grad_(true);
  torch::Tensor loss =
      torch::log_softmax(x, -1).gather(1, targets.unsqueeze(1)).mean().neg();  // ()
  torch::Tensor dx = torch::autograd::grad({loss * grad}, {x})[0];
  return {loss.detach(), dx};
}

std::pair<torch::Tensor, torch::Tensor> Fused(const torch::Tensor& logits,
                                              const torch::Tensor& targets, double grad) {
  auto [loss, lse] = NextTokenLossForward(logits, targets);
  torch::Tensor dx =
      NextTokenLossBackward(torch::full({}, grad, torch::kDouble), logits, targets, lse);
  return {loss, dx};
}

class NextTokenLossTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(NextTokenLossTest, MatchesTheCompositeFormula) {
  const int64_t v = GetParam(), n = 300;
  torch::manual_seed(21);
  const torch::Tensor logits = torch::randn({n, v}, torch::kDouble) * 3;
  const torch::Tensor targets = torch::randint(0, v, {n}, torch::kLong);
  const double grad = 0.7;
  const auto [want_loss, want_dx] = Composite(logits, targets, grad);

  const auto [loss64, dx64] = Fused(logits, targets, grad);
  EXPECT_NEAR(loss64.item<double>(), want_loss.item<double>(), 1e-12);
  EXPECT_TRUE(torch::allclose(dx64, want_dx, 1e-12, 1e-15));

  const auto [loss32, dx32] = Fused(logits.to(torch::kFloat), targets, grad);
  EXPECT_EQ(loss32.scalar_type(), torch::kFloat);
  EXPECT_NEAR(loss32.item<double>(), want_loss.item<double>(), 1e-5);
  EXPECT_TRUE(torch::allclose(dx32.to(torch::kDouble), want_dx, 1e-5, 1e-8));

  // bfloat16 logits (autocast): computed in float32 against float64 on the same values; the
  // gradient is rounded once to bfloat16 (2^-8 relative).
  const torch::Tensor logits16 = logits.to(torch::kBFloat16);
  const auto [want16_loss, want16_dx] = Composite(logits16, targets, grad);
  const auto [loss16, dx16] = Fused(logits16, targets, grad);
  EXPECT_EQ(loss16.scalar_type(), torch::kFloat);
  EXPECT_EQ(dx16.scalar_type(), torch::kBFloat16);
  EXPECT_NEAR(loss16.item<double>(), want16_loss.item<double>(), 1e-5);
  EXPECT_TRUE(
      ((dx16.to(torch::kDouble) - want16_dx).abs() <= want16_dx.abs() * std::ldexp(1.0, -8) + 1e-9)
          .all()
          .item<bool>())
      << "kernels " << KernelIsa();
}

TEST_P(NextTokenLossTest, OneAndTwoThreadsAgreeExactly) {
  const int64_t v = GetParam(), n = 2000;
  torch::manual_seed(22);
  const torch::Tensor logits = torch::randn({n, v});
  const torch::Tensor targets = torch::randint(0, v, {n}, torch::kLong);
  const int previous = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = Fused(logits, targets, 1.0);
  at::set_num_threads(2);
  const auto two = Fused(logits, targets, 1.0);
  at::set_num_threads(previous);
  EXPECT_EQ(one.first.item<float>(), two.first.item<float>());
  EXPECT_TRUE(torch::equal(one.second, two.second));
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, NextTokenLossTest, ::testing::Values(5, 16, 37, 2048),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return "V" + std::to_string(info.param);
                         });

TEST(NextTokenLoss, RefusesTargetsOutsideTheVocabulary) {
  const torch::Tensor logits = torch::randn({3, 10});
  for (const int64_t bad : {-1, 10}) {
    const torch::Tensor targets = torch::tensor(std::vector<int64_t>{2, bad, 4});
    try {
      NextTokenLossForward(logits, targets);
      ADD_FAILURE() << "target " << bad << " accepted";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find("target " + std::to_string(bad) + " outside"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_FALSE(NextTokenLossSupports(logits.t(), torch::zeros({10}, torch::kLong)));  // strided
  EXPECT_FALSE(NextTokenLossSupports(logits, torch::zeros({3}, torch::kInt)));        // int32
  EXPECT_FALSE(NextTokenLossSupports(logits, torch::zeros({4}, torch::kLong)));       // rows
}

}  // namespace
}  // namespace xmod::cpu
