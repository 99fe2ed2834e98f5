#include "worker/device_discovery.h"

#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(ParseNvidiaSmiCsv, ParsesGpusWithAndWithoutUnits) {
  auto slots = ParseNvidiaSmiCsv("0, NVIDIA H200, 143771 MiB\n1, NVIDIA H200, 143771\n\n", 4);
  ASSERT_TRUE(slots.ok()) << slots.status();
  ASSERT_EQ(slots->size(), 2u);
  EXPECT_EQ((*slots)[0].index(), 0);
  EXPECT_EQ((*slots)[0].kind(), v1::CUDA);
  EXPECT_EQ((*slots)[0].device(), 0);
  EXPECT_EQ((*slots)[0].description(), "NVIDIA H200");
  EXPECT_EQ((*slots)[0].memory_bytes(), int64_t{143771} * 1024 * 1024);
  EXPECT_EQ((*slots)[1].index(), 1);
  EXPECT_EQ((*slots)[1].device(), 1);
  EXPECT_EQ((*slots)[1].cores(), 4);
}

TEST(ParseNvidiaSmiCsv, RejectsMalformedLines) {
  auto slots = ParseNvidiaSmiCsv("NVIDIA-SMI has failed\n", 1);
  EXPECT_EQ(slots.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(slots.status().message().find("NVIDIA-SMI has failed"), std::string::npos);
  EXPECT_FALSE(ParseNvidiaSmiCsv("0, H200, lots\n", 1).ok());
}

TEST(MakeCpuSlots, SplitsCoresAndMemory) {
  auto slots = MakeCpuSlots(2, 0, 16, 1000);
  ASSERT_TRUE(slots.ok());
  ASSERT_EQ(slots->size(), 2u);
  EXPECT_EQ((*slots)[1].index(), 1);
  EXPECT_EQ((*slots)[1].kind(), v1::CPU);
  EXPECT_EQ((*slots)[1].cores(), 8);
  EXPECT_EQ((*slots)[1].memory_bytes(), 500);
  EXPECT_EQ((*MakeCpuSlots(3, 0, 2, 0))[0].cores(), 1);  // at least one core
  EXPECT_EQ((*MakeCpuSlots(1, 5, 2, 0))[0].cores(), 5);  // explicit
  EXPECT_EQ(MakeCpuSlots(0, 0, 2, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeCpuSlots(1, -1, 2, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SystemDeviceProbe, UsesGpusThatTheCommandLists) {
  SystemProbeOptions options;
  options.nvidia_smi_command = "printf '0, NVIDIA H200, 1024 MiB\\n'";
  options.cores_per_slot = 3;
  auto slots = SystemDeviceProbe(options).Probe();
  ASSERT_TRUE(slots.ok()) << slots.status();
  ASSERT_EQ(slots->size(), 1u);
  EXPECT_EQ((*slots)[0].kind(), v1::CUDA);
  EXPECT_EQ((*slots)[0].cores(), 3);
}

TEST(SystemDeviceProbe, FallsBackToCpuSlotsWithoutGpus) {
  SystemProbeOptions options;
  options.nvidia_smi_command = "exit 127";  // nvidia-smi missing
  options.cpu_slots = 2;
  options.cores_per_slot = 1;
  auto slots = SystemDeviceProbe(options).Probe();
  ASSERT_TRUE(slots.ok()) << slots.status();
  ASSERT_EQ(slots->size(), 2u);
  EXPECT_EQ((*slots)[0].kind(), v1::CPU);
  EXPECT_EQ((*slots)[1].cores(), 1);

  options.nvidia_smi_command = "printf '0, NVIDIA H200, 1024 MiB\\n'";
  options.use_gpus = false;
  EXPECT_EQ((*SystemDeviceProbe(options).Probe())[0].kind(), v1::CPU);
}

}  // namespace
}  // namespace xmod
