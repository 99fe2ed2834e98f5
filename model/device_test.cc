// What the device offers the model (device.h, autocast.h): in a build with CUDA, LibTorch's
// graphs for CUDA are registered (step_graph.h records the step with them), GPU or not; on a
// GPU, its compute capability and what precision "auto" resolves to there. The GPU checks
// skip where none is visible (scripts/gpu-check.sh runs them on one).
#include "model/device.h"

#include <ATen/core/GraphImplInterface.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/autocast.h"

namespace xmod {
namespace {

TEST(DeviceTest, CudaBuildsHaveCudaGraphs) {
  EXPECT_EQ(at::has_graph_impl(c10::DeviceType::CUDA), HasCudaBuild()) << TorchBuildSummary();
  EXPECT_FALSE(at::has_graph_impl(c10::DeviceType::CPU));
  EXPECT_EQ(CudaComputeCapabilityMajor(torch::kCPU), 0);
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
