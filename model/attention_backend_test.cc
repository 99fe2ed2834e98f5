// SDPA's backends by measurement (attention_backend.h): nothing is measured or changed on the
// CPU; the fastest accepting backend wins; the guard restores LibTorch's switches.
#include "model/attention_backend.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace xmod {
namespace {

TEST(SdpaBackendTest, CpuAttentionIsNotMeasured) {
  const torch::Tensor q = torch::randn({1, 4, 8, 16}), kv = torch::randn({1, 2, 8, 16});
  int measured = 0;
  const SdpaTimer count = [&](SdpaBackend, const SdpaShape&) {
    ++measured;
    return 1.0;
  };
  EXPECT_EQ(ChooseSdpaBackend(q, kv, kv, count), SdpaBackend::kDefault);
  EXPECT_EQ(measured, 0);
  EXPECT_TRUE(SdpaChoices().empty());
}

TEST(SdpaBackendTest, FastestAcceptingBackendWins) {
  EXPECT_EQ(Fastest({{SdpaBackend::kFlash, 2e-3},
                     {SdpaBackend::kCudnn, 1e-3},
                     {SdpaBackend::kEfficient, -1}}),
            SdpaBackend::kCudnn);
  EXPECT_EQ(Fastest({{SdpaBackend::kFlash, 1e-3}, {SdpaBackend::kCudnn, -1}}), SdpaBackend::kFlash);
  EXPECT_EQ(Fastest({{SdpaBackend::kFlash, -1}, {SdpaBackend::kCudnn, -1}}), SdpaBackend::kDefault);
  EXPECT_EQ(Fastest({}), SdpaBackend::kDefault);
  EXPECT_EQ(std::string(SdpaBackendName(SdpaBackend::kFlash3)), "flash3");
}

// Only the chosen backend is enabled while the guard lives; the switches are restored after,
// and kDefault touches nothing. The CPU's attention also runs with a CUDA backend chosen.
TEST(SdpaBackendTest, GuardEnablesOneBackendAndRestores) {
  at::Context& ctx = at::globalContext();
  const bool flash = ctx.userEnabledFlashSDP(), efficient = ctx.userEnabledMemEfficientSDP(),
             cudnn = ctx.userEnabledCuDNNSDP(), math = ctx.userEnabledMathSDP();
  {
    SdpaBackendGuard only(SdpaBackend::kEfficient);
    EXPECT_TRUE(ctx.userEnabledMemEfficientSDP());
    EXPECT_FALSE(ctx.userEnabledFlashSDP());
    EXPECT_FALSE(ctx.userEnabledCuDNNSDP());
    EXPECT_FALSE(ctx.userEnabledMathSDP());
  }
  EXPECT_EQ(ctx.userEnabledFlashSDP(), flash);
  EXPECT_EQ(ctx.userEnabledMemEfficientSDP(), efficient);
  EXPECT_EQ(ctx.userEnabledCuDNNSDP(), cudnn);
  EXPECT_EQ(ctx.userEnabledMathSDP(), math);
  {
    SdpaBackendGuard none(SdpaBackend::kDefault);
    EXPECT_EQ(ctx.userEnabledMathSDP(), math);
  }
}

// On a GPU: each shape is measured once (every candidate backend), then taken from the cache;
// the choice is a backend that accepted it. Skips without a GPU.
TEST(SdpaBackendTest, GpuShapesAreMeasuredOnce) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  const torch::Tensor q = torch::randn({2, 8, 256, 64}, bf16),
                      kv = torch::randn({2, 4, 256, 64}, bf16);
  int measured = 0;
  const SdpaTimer timer = [&](SdpaBackend backend, const SdpaShape& shape) {
    ++measured;
    EXPECT_EQ(shape.dims, (std::vector<int64_t>{2, 8, 4, 256, 256, 64}));
    return backend == SdpaBackend::kEfficient ? 1e-3 : 2e-3;
  };
  EXPECT_EQ(ChooseSdpaBackend(q, kv, kv, timer), SdpaBackend::kEfficient);
  const int first = measured;
  EXPECT_GT(first, 1);
  EXPECT_EQ(ChooseSdpaBackend(q, kv, kv, timer), SdpaBackend::kEfficient);
  EXPECT_EQ(measured, first);
  // The device's own timing picks a backend that runs this shape.
  const torch::Tensor q2 = torch::randn({2, 8, 512, 64}, bf16),
                      kv2 = torch::randn({2, 4, 512, 64}, bf16);
  EXPECT_NE(ChooseSdpaBackend(q2, kv2, kv2), SdpaBackend::kDefault);
  EXPECT_EQ(SdpaChoices().size(), 2u);
}

}  // namespace
}  // namespace xmod
