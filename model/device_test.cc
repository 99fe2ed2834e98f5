// What the device offers the model (device.h, autocast.h): no compute capability off a GPU;
// on a GPU, its compute capability and what precision "auto" resolves to there. The GPU checks
// skip where none is visible (scripts/gpu-check.sh runs them on one).
#include "model/device.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/autocast.h"

namespace xmod {
namespace {

TEST(DeviceTest, ACpuHasNoComputeCapability) {
  EXPECT_EQ(CudaComputeCapabilityMajor(torch::kCPU), 0) << TorchBuildSummary();
}

TEST(DeviceTest, GpuCapabilityDecidesAutoPrecision) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  const torch::Device cuda(torch::kCUDA, 0);
  const int major = CudaComputeCapabilityMajor(cuda);
  EXPECT_GE(major, 5);
  EXPECT_EQ(AutocastForPrecision("auto", cuda, /*d_model=*/512).enabled,
            major >= kMinBf16CudaCapability);
}

}  // namespace
}  // namespace xmod
