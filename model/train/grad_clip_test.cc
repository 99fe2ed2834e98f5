// Tests of global gradient-norm clipping: the norm over all gradients, the scale rule of
// torch.nn.utils.clip_grad_norm_, and what it leaves alone.
#include "model/train/grad_clip.h"

#include <cmath>

#include "gtest/gtest.h"

namespace xmod {
namespace {

std::vector<torch::Tensor> ParamsWithGrads(const std::vector<torch::Tensor>& grads) {
  std::vector<torch::Tensor> params;
  for (const torch::Tensor& g : grads) {
    torch::Tensor p = torch::zeros_like(g).requires_grad_(true);
    p.mutable_grad() = g.clone();
    params.push_back(p);
  }
  return params;
}

TEST(ClipGradNormTest, ScalesEveryGradientByTheGlobalNorm) {
  torch::manual_seed(0);
  std::vector<torch::Tensor> grads = {torch::randn({4, 3}), torch::randn({5}),
                                      torch::randn({2, 2, 2})};
  std::vector<torch::Tensor> params = ParamsWithGrads(grads);
  params.push_back(torch::zeros({3}).requires_grad_(true));  // no gradient: skipped
  double squares = 0;
  for (const torch::Tensor& g : grads) squares += g.square().sum().item<double>();
  const double norm = std::sqrt(squares), max_norm = 0.5;
  torch::Tensor total = ClipGradNorm(params, max_norm);
  EXPECT_NEAR(total.item<double>(), norm, 1e-5);
  const double scale = max_norm / (norm + 1e-6);
  for (size_t i = 0; i < grads.size(); ++i) {
    EXPECT_TRUE(torch::allclose(params[i].grad(), grads[i] * scale, 1e-6, 1e-6)) << i;
  }
  EXPECT_FALSE(params.back().grad().defined());
}

TEST(ClipGradNormTest, LeavesGradientsUnderTheLimitAlone) {
  std::vector<torch::Tensor> grads = {torch::full({3}, 0.1), torch::full({2, 2}, 0.1)};
  std::vector<torch::Tensor> params = ParamsWithGrads(grads);
  ClipGradNorm(params, 10.0);
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_TRUE(torch::equal(params[i].grad(), grads[i]));
}

TEST(ClipGradNormTest, KeepsEachGradientsDtype) {
  std::vector<torch::Tensor> grads = {torch::full({4}, 2.0, torch::kBFloat16),
                                      torch::full({4}, 2.0)};
  std::vector<torch::Tensor> params = ParamsWithGrads(grads);
  torch::Tensor total = ClipGradNorm(params, 1.0);
  EXPECT_EQ(total.scalar_type(), torch::kFloat32);
  EXPECT_NEAR(total.item<double>(), std::sqrt(32.0), 1e-5);
  EXPECT_EQ(params[0].grad().scalar_type(), torch::kBFloat16);
  EXPECT_NEAR(params[1].grad()[0].item<double>(), 2.0 / std::sqrt(32.0), 1e-5);
  EXPECT_NEAR(params[0].grad()[0].item<double>(), 2.0 / std::sqrt(32.0), 4e-3);
}

TEST(ClipGradNormTest, NoGradientsGiveNoNorm) {
  EXPECT_FALSE(ClipGradNorm({torch::zeros({2}).requires_grad_(true)}, 1.0).defined());
}

}  // namespace
}  // namespace xmod
