// The CUDA kernels (kernels.h) against the formulas they replace, values and gradients, on a
// GPU: float32 to float32 rounding, bfloat16 to bfloat16's. The reference is the formula in
// float64 with autograd for the gradients. Built with -DXMOD_CUDA=ON and the kernels; every
// test skips where no GPU is visible (CI builds it; scripts/gpu-check.sh runs it on a GPU).
#include "model/cuda/kernels.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "model/ffn.h"
#include "model/kernel_choice.h"
#include "model/rms_norm.h"
#include "model/transformer.h"

namespace xmod {
namespace {

class CudaKernelsTest : public ::testing::TestWithParam<torch::Dtype> {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  }
  torch::Dtype dtype() const { return GetParam(); }
  // Tolerance relative to a tensor's largest entry: float32's or bfloat16's rounding.
  double tolerance() const { return dtype() == torch::kBFloat16 ? 1e-2 : 2e-5; }
  void ExpectClose(const torch::Tensor& got, const torch::Tensor& want, const char* what) const {
    const double scale = want.abs().max().item<double>() + 1e-12;
    const double error =
        (got.to(torch::kFloat64).cpu() - want.to(torch::kFloat64).cpu()).abs().max().item<double>();
    EXPECT_LE(error, tolerance() * scale) << what << ": error " << error << " of " << scale;
  }
  torch::Tensor Random(std::vector<int64_t> shape, double scale = 1.0) const {
    return (torch::randn(shape, torch::kFloat64) * scale).to(torch::kCUDA, dtype());
  }
};

// silu(a) * b and its gradients, at a size that leaves a partial block.
TEST_P(CudaKernelsTest, SwiGluGateMatchesTheFormula) {
  torch::manual_seed(1);
  const torch::Tensor a = Random({37, 515}, 3.0), b = Random({37, 515}), g = Random({37, 515});
  ASSERT_NE(SwiGluKernelsFor(a, b), nullptr);
  EXPECT_EQ(SwiGluKernelsFor(a, b)->path, KernelPath::kCuda);
  torch::Tensor a64 = a.to(torch::kFloat64).requires_grad_(true);
  torch::Tensor b64 = b.to(torch::kFloat64).requires_grad_(true);
  torch::Tensor want = torch::silu(a64) * b64;
  want.backward(g.to(torch::kFloat64));
  ExpectClose(cuda::SwiGluForward(a, b), want.detach(), "out");
  auto [da, db] = cuda::SwiGluBackward(g, a, b);
  ExpectClose(da, a64.grad(), "da");
  ExpectClose(db, b64.grad(), "db");
  // Through the layer's node: the same kernels, autograd's gradients.
  torch::Tensor a1 = a.detach().requires_grad_(true), b1 = b.detach().requires_grad_(true);
  SwiGluGate(a1, b1).backward(g);
  ExpectClose(a1.grad(), a64.grad(), "node da");
}

// RMSNorm over rows of the model's widths (the norms' 512, QK-Norm's 64) and an odd one; x in
// float32 or bfloat16, the gain float32; y float32.
TEST_P(CudaKernelsTest, RmsNormMatchesTheFormula) {
  torch::manual_seed(2);
  for (int64_t d : {64, 512, 300}) {
    const torch::Tensor x = Random({3, 129, d}, 2.0);
    const torch::Tensor w =
        (1 + 0.1 * torch::randn({d}, torch::kFloat64)).to(torch::kCUDA, torch::kFloat);
    const torch::Tensor dy =
        (torch::randn({3, 129, d}, torch::kFloat64)).to(torch::kCUDA, torch::kFloat);
    torch::Tensor x64 = x.to(torch::kFloat64).requires_grad_(true);
    torch::Tensor w64 = w.to(torch::kFloat64).requires_grad_(true);
    torch::Tensor want = x64 * torch::rsqrt(x64.square().mean(-1, true) + 1e-6) * w64;
    want.backward(dy.to(torch::kFloat64));
    auto [y, inv] = cuda::RmsNormForward(x, w, 1e-6);
    EXPECT_EQ(y.scalar_type(), torch::kFloat);
    ExpectClose(y, want.detach(), "y");
    auto [dx, dw] = cuda::RmsNormBackward(dy, x, inv, w);
    EXPECT_EQ(dx.scalar_type(), dtype());
    ExpectClose(dx, x64.grad(), "dx");
    ExpectClose(dw, w64.grad(), "dw");
    // The module takes them.
    RMSNorm norm(d);
    norm->to(torch::kCUDA);
    ASSERT_NE(RmsNormKernelsFor(x, norm->weight), nullptr);
  }
}

// The mean next-token cross-entropy at a GPT-2-sized vocabulary and a small one, with its
// gradient, through the transformer's loss node (which takes the kernels).
TEST_P(CudaKernelsTest, NextTokenLossMatchesTheFormula) {
  torch::manual_seed(3);
  for (int64_t v : {50257, 37}) {
    const torch::Tensor logits = Random({65, v}, 4.0);
    const torch::Tensor targets = torch::randint(0, v, {65}, torch::kInt64).to(torch::kCUDA);
    ASSERT_NE(NextTokenLossKernelsFor(logits, targets), nullptr);
    torch::Tensor l64 = logits.to(torch::kFloat64).requires_grad_(true);
    torch::Tensor want = torch::nll_loss(torch::log_softmax(l64, -1), targets);
    want.backward();
    torch::Tensor l = logits.detach().requires_grad_(true);
    torch::Tensor got = NextTokenLoss(l, targets);
    EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-5 * std::abs(want.item<double>()));
    got.backward();
    EXPECT_EQ(l.grad().scalar_type(), dtype());
    ExpectClose(l.grad(), l64.grad(), "dlogits");
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaKernelsTest,
                         ::testing::Values(torch::kFloat, torch::kBFloat16));

}  // namespace
}  // namespace xmod
