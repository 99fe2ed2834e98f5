// The choice of kernels (kernel_choice.h): which path each kind of tensor takes with and
// without the CUDA kernels, what the layers get on this machine's CPU, and the composite
// override, which must give the same results as the kernels it replaces.
#include "model/kernel_choice.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/ffn.h"
#include "model/rms_norm.h"
#include "model/transformer.h"

namespace xmod {
namespace {

using c10::ScalarType;
constexpr c10::DeviceType kCpu = c10::DeviceType::CPU, kCuda = c10::DeviceType::CUDA;

TEST(KernelChoiceTest, PathsByDeviceDtypeAndBuild) {
  const TensorKind cpu_f{kCpu, ScalarType::Float}, cpu_d{kCpu, ScalarType::Double},
      cpu_bf{kCpu, ScalarType::BFloat16}, cpu_h{kCpu, ScalarType::Half},
      cpu_long{kCpu, ScalarType::Long};
  const TensorKind gpu_f{kCuda, ScalarType::Float}, gpu_bf{kCuda, ScalarType::BFloat16},
      gpu_d{kCuda, ScalarType::Double}, gpu_long{kCuda, ScalarType::Long},
      gpu_strided{kCuda, ScalarType::BFloat16, /*contiguous=*/false};
  for (bool built : {false, true}) {
    const KernelPath cuda = built ? KernelPath::kCuda : KernelPath::kComposite;
    // SwiGLU: one dtype; the CPU's float, double or bfloat16, CUDA's float or bfloat16.
    EXPECT_EQ(PathFor(FusedOp::kSwiGlu, {cpu_f, cpu_f}, built), KernelPath::kCpu);
    EXPECT_EQ(PathFor(FusedOp::kSwiGlu, {cpu_bf, cpu_bf}, built), KernelPath::kCpu);
    EXPECT_EQ(PathFor(FusedOp::kSwiGlu, {cpu_f, cpu_bf}, built), KernelPath::kComposite);
    EXPECT_EQ(PathFor(FusedOp::kSwiGlu, {cpu_h, cpu_h}, built), KernelPath::kComposite);
    EXPECT_EQ(PathFor(FusedOp::kSwiGlu, {gpu_bf, gpu_bf}, built), cuda);
    EXPECT_EQ(PathFor(FusedOp::kSwiGlu, {gpu_f, gpu_f}, built), cuda);
    EXPECT_EQ(PathFor(FusedOp::kSwiGlu, {gpu_d, gpu_d}, built), KernelPath::kComposite);
    EXPECT_EQ(PathFor(FusedOp::kSwiGlu, {gpu_strided, gpu_bf}, built), KernelPath::kComposite);
    EXPECT_EQ(PathFor(FusedOp::kSwiGlu, {gpu_bf, cpu_bf}, built), KernelPath::kComposite);
    // RMSNorm: the CPU's float or double with a gain of the same dtype; on CUDA x float or
    // bfloat16 (QK-Norm's bfloat16 heads) with a float32 gain.
    EXPECT_EQ(PathFor(FusedOp::kRmsNorm, {cpu_d, cpu_d}, built), KernelPath::kCpu);
    EXPECT_EQ(PathFor(FusedOp::kRmsNorm, {cpu_bf, cpu_f}, built), KernelPath::kComposite);
    EXPECT_EQ(PathFor(FusedOp::kRmsNorm, {gpu_bf, gpu_f}, built), cuda);
    EXPECT_EQ(PathFor(FusedOp::kRmsNorm, {gpu_f, gpu_f}, built), cuda);
    EXPECT_EQ(PathFor(FusedOp::kRmsNorm, {gpu_f, gpu_bf}, built), KernelPath::kComposite);
    // The loss: contiguous logits, int64 targets on the same device.
    EXPECT_EQ(PathFor(FusedOp::kNextTokenLoss, {cpu_bf, cpu_long}, built), KernelPath::kCpu);
    EXPECT_EQ(PathFor(FusedOp::kNextTokenLoss, {cpu_h, cpu_long}, built), KernelPath::kComposite);
    EXPECT_EQ(PathFor(FusedOp::kNextTokenLoss, {gpu_bf, gpu_long}, built), cuda);
    EXPECT_EQ(PathFor(FusedOp::kNextTokenLoss, {gpu_strided, gpu_long}, built),
              KernelPath::kComposite);
    EXPECT_EQ(PathFor(FusedOp::kNextTokenLoss, {gpu_bf, cpu_long}, built), KernelPath::kComposite);
    EXPECT_EQ(PathFor(FusedOp::kNextTokenLoss, {gpu_bf, gpu_f}, built), KernelPath::kComposite);
  }
}

// On this machine's CPU the layers get the CPU kernels; under ScopedCompositeKernels, none.
TEST(KernelChoiceTest, CpuTensorsTakeTheCpuKernelsUnlessOverridden) {
  const torch::Tensor a = torch::randn({4, 6}), w = torch::ones({6});
  const torch::Tensor targets = torch::zeros({4}, torch::kLong);
  ASSERT_NE(SwiGluKernelsFor(a, a), nullptr);
  EXPECT_EQ(SwiGluKernelsFor(a, a)->path, KernelPath::kCpu);
  ASSERT_NE(RmsNormKernelsFor(a, w), nullptr);
  ASSERT_NE(NextTokenLossKernelsFor(a, targets), nullptr);
  EXPECT_EQ(RmsNormKernelsFor(a, torch::ones({5})), nullptr);  // a gain of another width
  const torch::Tensor q = torch::randn({1, 16, 2, 16}), kv = torch::randn({1, 16, 1, 16});
  EXPECT_TRUE(CpuCausalAttentionInputs(q, kv, kv).has_value());
  {
    ScopedCompositeKernels composite;
    EXPECT_EQ(SwiGluKernelsFor(a, a), nullptr);
    EXPECT_EQ(RmsNormKernelsFor(a, w), nullptr);
    EXPECT_EQ(NextTokenLossKernelsFor(a, targets), nullptr);
    EXPECT_FALSE(CpuCausalAttentionInputs(q, kv, kv).has_value());
    EXPECT_FALSE(RouterOnCpu(a, w, w));
  }
  EXPECT_EQ(SwiGluKernelsFor(a, a)->path, KernelPath::kCpu);
  EXPECT_EQ(KernelPathName(KernelPath::kCuda), std::string("cuda"));
}

// The layers give the same values and gradients on either path: the override swaps the
// kernels for the composite formulas, nothing else.
TEST(KernelChoiceTest, CompositeAndKernelsAgreeThroughTheLayers) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({3, 8, 24}, torch::kFloat64);
  const torch::Tensor targets = torch::randint(0, 24, {24}, torch::kLong);
  RMSNorm norm(24);
  norm->to(torch::kFloat64);
  auto run = [&] {
    torch::Tensor in = x.clone().requires_grad_(true);
    torch::Tensor h = norm->forward(in);      // (3, 8, 24)
    torch::Tensor gated = SwiGluGate(h, in);  // (3, 8, 24)
    torch::Tensor loss = NextTokenLoss(gated.reshape({24, 24}), targets);
    loss.backward();
    return std::make_pair(loss.detach(), in.grad());
  };
  auto [kernel_loss, kernel_grad] = run();
  ScopedCompositeKernels composite;
  auto [composite_loss, composite_grad] = run();
  EXPECT_NEAR(kernel_loss.item<double>(), composite_loss.item<double>(), 1e-12);
  EXPECT_TRUE(torch::allclose(kernel_grad, composite_grad, 1e-10, 1e-12));
}

}  // namespace
}  // namespace xmod
