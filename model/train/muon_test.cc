// Tests of Muon: Newton–Schulz orthogonalization, update scale, momentum and weight decay.
#include "model/train/muon.h"

#include <cmath>

#include "gtest/gtest.h"

namespace xmod {
namespace {

// Singular values of NS5(G) for a random G lie near 1: the quintic maps (0, 1] into roughly
// [0.7, 1.2] once σ/‖G‖_F exceeds ~a⁻⁵ = 1/485 (a = 3.4445), which holds for Gaussian
// rectangular matrices. G's own singular values spread by a factor of several.
TEST(NewtonSchulzTest, OrthogonalizesRandomMatrices) {
  torch::manual_seed(0);
  for (auto shape : {std::vector<int64_t>{64, 32}, {32, 64}, {96, 40}}) {
    torch::Tensor g = torch::randn(shape);
    torch::Tensor sg = at::linalg_svdvals(g);
    EXPECT_GT((sg.max() / sg.min()).item<double>(), 2.5);
    torch::Tensor x = NewtonSchulz5(g, 5);
    ASSERT_EQ(x.sizes(), g.sizes());
    torch::Tensor s = at::linalg_svdvals(x);
    EXPECT_GT(s.min().item<double>(), 0.6) << shape[0] << "x" << shape[1];
    EXPECT_LT(s.max().item<double>(), 1.25) << shape[0] << "x" << shape[1];
    // Same singular vectors: X is close to the exact polar factor U Vᵀ.
    auto [u, sv, vh] = at::linalg_svd(g, /*full_matrices=*/false);
    torch::Tensor polar = torch::matmul(u, vh);
    const double cosine =
        (x * polar).sum().item<double>() / (x.norm().item<double>() * polar.norm().item<double>());
    EXPECT_GT(cosine, 0.98);
  }
}

// Under bf16 training the iteration's products run in bfloat16 (as Muon's reference
// implementation runs them): it orthogonalizes as well as float32 does, and the two agree to
// bfloat16's rounding.
TEST(NewtonSchulzTest, Bfloat16ProductsOrthogonalizeLikeFloat32) {
  torch::manual_seed(6);
  for (auto shape : {std::vector<int64_t>{64, 32}, {32, 64}, {128, 344}}) {
    torch::Tensor g = torch::randn(shape);
    torch::Tensor x32 = NewtonSchulz5(g, 5), x16 = NewtonSchulz5(g, 5, torch::kBFloat16);
    ASSERT_EQ(x16.scalar_type(), torch::kFloat32);
    ASSERT_EQ(x16.sizes(), g.sizes());
    torch::Tensor s16 = at::linalg_svdvals(x16), s32 = at::linalg_svdvals(x32);
    EXPECT_NEAR(s16.min().item<double>(), s32.min().item<double>(), 0.05) << shape[0];
    EXPECT_NEAR(s16.max().item<double>(), s32.max().item<double>(), 0.05) << shape[0];
    EXPECT_LT(((x16 - x32).norm() / x32.norm()).item<double>(), 0.03) << shape[0];
  }
}

TEST(MuonTest, IteratesInBfloat16OnlyUnderBfloat16Autocast) {
  EXPECT_EQ(MuonIterationDtype({true, torch::kBFloat16}), torch::kBFloat16);
  EXPECT_EQ(MuonIterationDtype({false, torch::kBFloat16}), torch::kFloat32);
  EXPECT_EQ(MuonIterationDtype({true, torch::kHalf}), torch::kFloat32);
}

TEST(NewtonSchulzTest, BatchedOverLeadingDimensions) {
  torch::manual_seed(1);
  torch::Tensor g = torch::randn({3, 16, 8});
  torch::Tensor x = NewtonSchulz5(g, 5);
  for (int e = 0; e < 3; ++e) {
    EXPECT_TRUE(torch::allclose(x[e], NewtonSchulz5(g[e], 5), 1e-5, 1e-5));
  }
}

TEST(MuonTest, UpdateScaleIsRmsMatched) {
  EXPECT_DOUBLE_EQ(MuonUpdateScale(1024, 3072, 0.2), 0.2 * std::sqrt(3072.0));
  EXPECT_DOUBLE_EQ(MuonUpdateScale(3072, 1024, 0.2), 0.2 * std::sqrt(3072.0));
  // An orthogonal update of a wide r x c matrix has RMS sqrt(r / (r c)) = 1/sqrt(c); after the
  // scale its RMS is 0.2 when the matrix is square, like AdamW's typical update.
  torch::manual_seed(2);
  torch::Tensor u = NewtonSchulz5(torch::randn({64, 64}), 5) * MuonUpdateScale(64, 64, 0.2);
  EXPECT_NEAR(u.square().mean().sqrt().item<double>(), 0.2, 0.03);
}

TEST(MuonTest, FirstStepMatchesTheFormula) {
  torch::manual_seed(3);
  torch::Tensor w = torch::randn({8, 16}).requires_grad_(true);
  torch::Tensor w0 = w.detach().clone();
  torch::Tensor g = torch::randn({8, 16});
  w.mutable_grad() = g.clone();
  MuonOptions options;
  Muon muon({w}, options);
  const double lr = 0.01;
  muon.Step(lr);
  // m = g; Nesterov direction g + β m = (1 + β) g; NS normalizes away the factor.
  torch::Tensor expected =
      w0 * (1 - lr * 0.1) - lr * MuonUpdateScale(8, 16, 0.2) * NewtonSchulz5(g * 1.95, 5);
  EXPECT_TRUE(torch::allclose(w.detach(), expected, 1e-6, 1e-6));
  EXPECT_TRUE(torch::equal(muon.momentum()[0], g));
  // Second step: m = β g + g2.
  torch::Tensor g2 = torch::randn({8, 16});
  w.mutable_grad() = g2.clone();
  muon.Step(lr);
  EXPECT_TRUE(torch::allclose(muon.momentum()[0], 0.95 * g + g2, 1e-6, 1e-6));
  muon.ZeroGrad();
  EXPECT_FALSE(w.grad().defined());
}

// The form a recorded step runs, with lr read from device tensors, computes what Step
// computes to float32 rounding (the weight update is a product and a sum where Step fuses
// them), with a parameter without a gradient left alone in both.
TEST(MuonTest, StepOnDeviceMatchesStep) {
  torch::manual_seed(4);
  std::vector<torch::Tensor> ours, theirs;
  for (auto shape : {std::vector<int64_t>{8, 4}, {8, 4}, {4, 12}, {3, 5}}) {
    torch::Tensor init = torch::randn(shape);
    ours.push_back(init.clone().requires_grad_(true));
    theirs.push_back(init.clone().requires_grad_(true));
  }
  const torch::Tensor first = ours.front().detach().clone();
  Muon eager(ours, MuonOptions{});
  Muon on_device(theirs, MuonOptions{});
  for (int step = 0; step < 4; ++step) {
    const double lr = 0.02 * (1.0 - 0.2 * step);
    for (size_t i = 0; i + 1 < ours.size(); ++i) {  // the last one gets no gradient
      torch::Tensor g = torch::randn_like(ours[i]);
      ours[i].mutable_grad() = g.clone();
      theirs[i].mutable_grad() = g.clone();
    }
    eager.Step(lr);
    on_device.StepOnDevice(torch::tensor(1.0 - lr * on_device.weight_decay(), torch::kFloat64),
                           torch::tensor(-lr, torch::kFloat64));
  }
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_TRUE(torch::allclose(ours[i], theirs[i], /*rtol=*/1e-6, /*atol=*/1e-7))
        << i << ": " << (ours[i] - theirs[i]).abs().max().item<double>();
  }
  EXPECT_TRUE(torch::equal(ours.back(), theirs.back()));
  EXPECT_FALSE(torch::equal(theirs.front(), first));  // the update moved the weights
}

TEST(MuonTest, ParametersWithoutGradientAreUntouched) {
  torch::Tensor w = torch::ones({4, 4}).requires_grad_(true);
  Muon muon({w}, MuonOptions());
  muon.Step(0.1);
  EXPECT_TRUE(torch::equal(w.detach(), torch::ones({4, 4})));
}

// Same-shaped matrices are orthogonalized as one batch: the result is what one matrix at a
// time computes, whatever the batch size, with a parameter lacking a gradient in the middle
// of a batch, a tall matrix and a stacked (E, R, C) parameter among them.
TEST(MuonTest, BatchesComputeWhatOneMatrixAtATimeComputes) {
  torch::manual_seed(4);
  const std::vector<std::vector<int64_t>> shapes = {{8, 16}, {16, 8}, {8, 16}, {2, 4, 6},
                                                    {8, 16}, {8, 16}, {16, 8}};
  auto fresh = [&] {
    std::vector<torch::Tensor> params;
    torch::manual_seed(5);
    for (const auto& shape : shapes) params.push_back(torch::randn(shape).requires_grad_(true));
    return params;
  };
  std::vector<torch::Tensor> one_by_one = fresh(), small_batches = fresh(), whole = fresh();
  std::vector<Muon> singles;
  for (const torch::Tensor& p : one_by_one) singles.emplace_back(std::vector{p}, MuonOptions());
  MuonOptions pairs;
  pairs.batch_bytes = 2 * 8 * 16 * sizeof(float);  // at most two 8 x 16 matrices a batch
  Muon small(small_batches, pairs), big(whole, MuonOptions());
  for (int step = 0; step < 2; ++step) {
    torch::manual_seed(10 + step);
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (i == 2 && step == 1) continue;  // no gradient: left untouched by every form
      torch::Tensor g = torch::randn(shapes[i]);
      one_by_one[i].mutable_grad() = g.clone();
      small_batches[i].mutable_grad() = g.clone();
      whole[i].mutable_grad() = g.clone();
    }
    for (Muon& single : singles) single.Step(0.02);
    small.Step(0.02);
    big.Step(0.02);
    for (auto* params : {&one_by_one, &small_batches, &whole}) {
      for (torch::Tensor& p : *params) p.mutable_grad() = torch::Tensor();
    }
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_TRUE(torch::allclose(small_batches[i], one_by_one[i], 1e-6, 1e-6)) << i;
    EXPECT_TRUE(torch::allclose(whole[i], one_by_one[i], 1e-6, 1e-6)) << i;
    EXPECT_TRUE(torch::equal(big.momentum()[i], singles[i].momentum()[0])) << i;
    EXPECT_TRUE(torch::equal(small.momentum()[i], singles[i].momentum()[0])) << i;
  }
}

}  // namespace
}  // namespace xmod
