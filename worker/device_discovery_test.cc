#include "worker/device_discovery.h"

#include <map>

#include "gtest/gtest.h"

namespace xmod {
namespace {

// An environment holding exactly `variables`.
EnvironmentLookup Environment(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const char* name) -> std::optional<std::string> {
    auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  };
}

constexpr char kTwoGpus[] = "printf '0, NVIDIA H200, 1024 MiB\\n1, NVIDIA H200, 1024 MiB\\n'";
constexpr char kFourGpus[] =
    "printf '0, NVIDIA H200, 1024 MiB\\n1, NVIDIA H200, 1024 MiB\\n"
    "2, NVIDIA H200, 1024 MiB\\n3, NVIDIA H200, 1024 MiB\\n'";

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
  options.environment = Environment({});
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
  options.environment = Environment({});
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

TEST(ReadSlurmAllocation, AbsentOutsideAJob) {
  auto allocation = ReadSlurmAllocation(Environment({{"SLURM_CPUS_ON_NODE", "4"}}));
  ASSERT_TRUE(allocation.ok()) << allocation.status();
  EXPECT_FALSE(allocation->has_value());
}

TEST(ReadSlurmAllocation, ReadsCpusAndGpusAsSlurmSetsThem) {
  auto batch = ReadSlurmAllocation(Environment({{"SLURM_JOB_ID", "42"},
                                                {"SLURM_JOB_CPUS_PER_NODE", "6(x2),4"},
                                                {"SLURM_JOB_GPUS", "2,3"},
                                                {"CUDA_VISIBLE_DEVICES", "0,1"}}));
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->has_value());
  EXPECT_EQ((*batch)->job_id, "42");
  EXPECT_EQ((*batch)->cpus, 6);
  EXPECT_EQ((*batch)->gpus, (std::vector<int>{2, 3}));
  EXPECT_EQ((*batch)->gpus_from, "SLURM_JOB_GPUS");

  // Inside an srun step the step's own variables win.
  auto step = ReadSlurmAllocation(Environment({{"SLURM_JOB_ID", "42"},
                                               {"SLURM_CPUS_ON_NODE", "3"},
                                               {"SLURM_JOB_CPUS_PER_NODE", "6"},
                                               {"SLURM_STEP_GPUS", "3"},
                                               {"SLURM_JOB_GPUS", "2,3"}}));
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ((*step)->cpus, 3);
  EXPECT_EQ((*step)->gpus, (std::vector<int>{3}));

  auto cuda_only =
      ReadSlurmAllocation(Environment({{"SLURM_JOB_ID", "7"}, {"CUDA_VISIBLE_DEVICES", "1"}}));
  ASSERT_TRUE(cuda_only.ok()) << cuda_only.status();
  EXPECT_EQ((*cuda_only)->cpus, 0);
  EXPECT_EQ((*cuda_only)->gpus, (std::vector<int>{1}));
  EXPECT_EQ((*cuda_only)->gpus_from, "CUDA_VISIBLE_DEVICES");
}

TEST(ReadSlurmAllocation, RejectsMalformedValuesNamingTheVariable) {
  auto cpus =
      ReadSlurmAllocation(Environment({{"SLURM_JOB_ID", "1"}, {"SLURM_CPUS_ON_NODE", "0"}}));
  EXPECT_EQ(cpus.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cpus.status().message().find("SLURM_CPUS_ON_NODE"), std::string::npos);
  auto gpus = ReadSlurmAllocation(
      Environment({{"SLURM_JOB_ID", "1"}, {"CUDA_VISIBLE_DEVICES", "GPU-5d2f,1"}}));
  EXPECT_EQ(gpus.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(gpus.status().message().find("CUDA_VISIBLE_DEVICES"), std::string::npos);
}

TEST(SystemDeviceProbe, OffersTheSlurmAllocationsCpus) {
  SystemProbeOptions options;
  options.environment = Environment({{"SLURM_JOB_ID", "9"}, {"SLURM_CPUS_ON_NODE", "3"}});
  options.nvidia_smi_command = kTwoGpus;  // the node's GPUs, none of them allocated
  auto slots = SystemDeviceProbe(options).Probe();
  ASSERT_TRUE(slots.ok()) << slots.status();
  ASSERT_EQ(slots->size(), 1u);
  EXPECT_EQ((*slots)[0].kind(), v1::CPU);
  EXPECT_EQ((*slots)[0].cores(), 3);

  options.cpu_slots = 3;
  slots = SystemDeviceProbe(options).Probe();
  ASSERT_TRUE(slots.ok()) << slots.status();
  ASSERT_EQ(slots->size(), 3u);
  EXPECT_EQ((*slots)[2].cores(), 1);

  options.cores_per_slot = 2;  // an explicit flag wins over the allocation
  EXPECT_EQ((*SystemDeviceProbe(options).Probe())[0].cores(), 2);
}

TEST(SystemDeviceProbe, OffersOnlyTheAllocatedGpus) {
  SystemProbeOptions options;
  options.environment =
      Environment({{"SLURM_JOB_ID", "9"}, {"SLURM_CPUS_ON_NODE", "8"}, {"SLURM_JOB_GPUS", "1,3"}});
  options.nvidia_smi_command = kFourGpus;
  auto slots = SystemDeviceProbe(options).Probe();
  ASSERT_TRUE(slots.ok()) << slots.status();
  ASSERT_EQ(slots->size(), 2u);
  EXPECT_EQ((*slots)[0].index(), 0);
  EXPECT_EQ((*slots)[0].device(), 1);
  EXPECT_EQ((*slots)[1].index(), 1);
  EXPECT_EQ((*slots)[1].device(), 3);
  EXPECT_EQ((*slots)[1].cores(), 4);  // the allocation's 8 CPUs over 2 GPUs

  // A device-constrained job sees only its own GPUs, renumbered from 0.
  options.nvidia_smi_command = kTwoGpus;
  slots = SystemDeviceProbe(options).Probe();
  ASSERT_TRUE(slots.ok()) << slots.status();
  ASSERT_EQ(slots->size(), 2u);
  EXPECT_EQ((*slots)[1].device(), 1);

  options.use_gpus = false;  // --gpus=false still means CPU slots
  EXPECT_EQ((*SystemDeviceProbe(options).Probe())[0].kind(), v1::CPU);
}

TEST(SystemDeviceProbe, FailsWhenAnAllocatedGpuIsNotListed) {
  SystemProbeOptions options;
  options.environment = Environment({{"SLURM_JOB_ID", "9"}, {"SLURM_STEP_GPUS", "5"}});
  options.nvidia_smi_command = kTwoGpus;
  auto slots = SystemDeviceProbe(options).Probe();
  EXPECT_EQ(slots.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(slots.status().message().find("SLURM_STEP_GPUS"), std::string::npos);

  options.nvidia_smi_command = "exit 127";
  EXPECT_EQ(SystemDeviceProbe(options).Probe().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace xmod
