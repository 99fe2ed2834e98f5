// GPU telemetry through a stand-in NVML (worker/fake_nvml.cc, loaded with dlopen as the real
// libnvidia-ml.so.1 is): readings, the worker's GPU gauges, per-attempt peak memory by pid or
// by GPU, and a clear refusal when no NVML can be loaded.
#include "worker/gpu_monitor.h"

#include <stdlib.h>

#include <string>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "worker/gpu_telemetry.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

class GpuMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = ::testing::TempDir() + "/fake_nvml_state";
    setenv("FAKE_NVML_STATE", state_.c_str(), 1);
    unsetenv("FAKE_NVML_FAIL_INIT");
  }
  void Write(const std::string& text) { ASSERT_TRUE(WriteFileAtomic(state_, text).ok()); }
  std::unique_ptr<GpuTelemetry> Load() {
    absl::StatusOr<std::unique_ptr<GpuTelemetry>> telemetry = GpuTelemetry::Load(XMOD_FAKE_NVML);
    EXPECT_TRUE(telemetry.ok()) << telemetry.status();
    return telemetry.ok() ? *std::move(telemetry) : nullptr;
  }
  std::string Scrape(prometheus::Registry& registry) {
    return prometheus::TextSerializer().Serialize(registry.Collect());
  }

  std::string state_;
};

TEST_F(GpuMonitorTest, ReadsEveryGpu) {
  Write(
      "gpu 0 87 1000 143771000000 512000 61 NVIDIA H200\n"
      "gpu 1 0 0 143771000000 - 35 NVIDIA H200\n"
      "proc 0 4242 900\n");
  std::unique_ptr<GpuTelemetry> telemetry = Load();
  ASSERT_NE(telemetry, nullptr);
  absl::StatusOr<std::vector<GpuReading>> readings = telemetry->Sample();
  ASSERT_TRUE(readings.ok()) << readings.status();
  ASSERT_EQ(readings->size(), 2u);
  const GpuReading& first = (*readings)[0];
  EXPECT_EQ(first.index, 0);
  EXPECT_EQ(first.name, "NVIDIA H200");
  EXPECT_DOUBLE_EQ(first.utilization, 0.87);
  EXPECT_EQ(first.memory_used_bytes, 1000);
  EXPECT_EQ(first.memory_total_bytes, 143771000000);
  EXPECT_DOUBLE_EQ(first.power_watts, 512);
  EXPECT_DOUBLE_EQ(first.temperature_celsius, 61);
  ASSERT_EQ(first.processes.size(), 1u);
  EXPECT_EQ(first.processes[0].pid, 4242);
  EXPECT_EQ(first.processes[0].memory_bytes, 900);
  EXPECT_EQ((*readings)[1].power_watts, -1);  // not reported by that board
}

TEST_F(GpuMonitorTest, ExportsGaugesAndEachAttemptsPeakMemory) {
  Write(
      "gpu 0 50 2000 80000 300000 55 NVIDIA H200\n"
      "gpu 1 10 7000 80000 - 40 NVIDIA H200\n"
      "proc 0 100 1500\nproc 0 999 500\n");
  prometheus::Registry registry;
  GpuMonitor monitor(Load(), registry, absl::ZeroDuration());
  monitor.Track({1, 1}, {0}, {100});  // its trainer is listed by pid
  monitor.Track({2, 1}, {1}, {555});  // its trainer is not: the GPU's memory in use counts
  ASSERT_TRUE(monitor.SampleOnce().ok());
  Write(
      "gpu 0 90 6000 80000 310000 66 NVIDIA H200\n"
      "gpu 1 10 3000 80000 - 40 NVIDIA H200\n"
      "proc 0 100 4000\n");
  ASSERT_TRUE(monitor.SampleOnce().ok());
  Write("gpu 0 25 1000 80000 100000 50 NVIDIA H200\ngpu 1 0 0 80000 - 30 NVIDIA H200\n");
  ASSERT_TRUE(monitor.SampleOnce().ok());
  EXPECT_EQ(monitor.Untrack({1, 1}), 4000);
  EXPECT_EQ(monitor.Untrack({2, 1}), 7000);
  EXPECT_EQ(monitor.Untrack({3, 1}), 0);  // never tracked

  const std::string text = Scrape(registry);
  EXPECT_THAT(text,
              HasSubstr("xmod_worker_gpu_utilization_ratio{gpu=\"0\",name=\"NVIDIA H200\"} 0.25"));
  EXPECT_THAT(text,
              HasSubstr("xmod_worker_gpu_memory_used_bytes{gpu=\"0\",name=\"NVIDIA H200\"} 1000"));
  EXPECT_THAT(
      text, HasSubstr("xmod_worker_gpu_memory_total_bytes{gpu=\"1\",name=\"NVIDIA H200\"} 80000"));
  EXPECT_THAT(text, HasSubstr("xmod_worker_gpu_power_watts{gpu=\"0\",name=\"NVIDIA H200\"} 100"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("xmod_worker_gpu_power_watts{gpu=\"1\"")));
  EXPECT_THAT(text,
              HasSubstr("xmod_worker_gpu_temperature_celsius{gpu=\"1\",name=\"NVIDIA H200\"} 30"));
}

TEST_F(GpuMonitorTest, NoNvmlIsUnavailableNamingTheLibrary) {
  absl::StatusOr<std::unique_ptr<GpuTelemetry>> missing =
      GpuTelemetry::Load("/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/libnvidia-ml.so.1"));
  setenv("FAKE_NVML_FAIL_INIT", "1", 1);
  absl::StatusOr<std::unique_ptr<GpuTelemetry>> broken = GpuTelemetry::Load(XMOD_FAKE_NVML);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(broken.status().message(), HasSubstr("Driver Not Loaded"));
}

}  // namespace
}  // namespace xmod
