// The golden test of the launch plan: fixed assignments whose whole plan, one line per value,
// must equal worker/testdata/launch_plan/<case>.txt. XMOD_UPDATE_GOLDEN=1 rewrites the files
// instead (review the change with git diff).
#include "worker/launch_plan.h"

#include <google/protobuf/text_format.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

constexpr int64_t kDeadline = 123'456;

// The plan as text: the attempt's files first, then each rank's process.
std::string Format(const LaunchPlan& plan) {
  std::vector<std::string> lines;
  lines.push_back("attempt_dir " + plan.attempt_dir);
  for (const std::string& dir : plan.dirs) lines.push_back("make_dir " + dir);
  lines.push_back("spec_path " + plan.spec_path);
  lines.push_back(absl::StrCat("spec.run_id ", plan.spec.run_id()));
  lines.push_back(absl::StrCat("spec.attempt ", plan.spec.attempt()));
  lines.push_back("spec.checkpoint_dir " + plan.spec.checkpoint_dir());
  lines.push_back("stale_rendezvous " +
                  (plan.stale_rendezvous.empty() ? "(none)" : plan.stale_rendezvous));
  lines.push_back("rendezvous " + plan.rendezvous);
  lines.push_back(absl::StrCat("ranks ", plan.rank_offset, "..",
                               plan.rank_offset + static_cast<int>(plan.ranks.size()) - 1, " of ",
                               plan.world_size));
  for (const std::string& path : plan.unverified_resume) lines.push_back("unverified " + path);
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const RankLaunch& rank = plan.ranks[r];
    lines.push_back(absl::StrCat("rank ", r, ": slot ", rank.slot, ", global rank ",
                                 rank.global_rank, ", ", rank.threads, " threads"));
    for (const std::string& arg : rank.launch.argv) lines.push_back("  argv " + arg);
    for (const auto& [name, value] : rank.launch.env) {
      lines.push_back(absl::StrCat("  env ", name, "=", value));
    }
    lines.push_back("  log " + rank.launch.log_path);
    lines.push_back(absl::StrCat("  events_fd ", rank.launch.events_fd));
    lines.push_back(absl::StrCat("  control_fd ", rank.launch.control_fd));
  }
  return absl::StrJoin(lines, "\n") + "\n";
}

// Compares `plan` with the golden file of `name`, or rewrites it under XMOD_UPDATE_GOLDEN=1.
void ExpectGolden(const std::string& name, const LaunchPlan& plan) {
  const std::string path = absl::StrCat(XMOD_WORKER_TESTDATA, "/launch_plan/", name, ".txt");
  const std::string got = Format(plan);
  const char* update = std::getenv("XMOD_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    ASSERT_TRUE(MakeDirs(absl::StrCat(XMOD_WORKER_TESTDATA, "/launch_plan")).ok());
    ASSERT_TRUE(WriteFileAtomic(path, got).ok()) << path;
    return;
  }
  absl::StatusOr<std::string> want = ReadFile(path);
  ASSERT_TRUE(want.ok()) << want.status() << " (XMOD_UPDATE_GOLDEN=1 writes it)";
  // gtest prints the line diff of the two (- golden, + now).
  EXPECT_EQ(*want, got) << "the plan differs from " << path << "; XMOD_UPDATE_GOLDEN=1 rewrites it";
}

v1::Slot MakeSlot(int32_t index, v1::SlotKind kind, int32_t cores, int32_t device = 0) {
  v1::Slot slot;
  slot.set_index(index);
  slot.set_kind(kind);
  slot.set_cores(cores);
  if (kind == v1::CUDA) slot.set_device(device);
  return slot;
}

LaunchInputs Inputs(int64_t run_id, int32_t attempt, std::vector<v1::Slot> slots) {
  LaunchInputs inputs;
  inputs.assignment.set_run_id(run_id);
  inputs.assignment.set_attempt(attempt);
  inputs.assignment.mutable_spec()->mutable_training()->set_seq_len(64);
  inputs.slots = std::move(slots);
  inputs.lease_deadline_ms = kDeadline;
  inputs.settings.train_bin = "/opt/xmod/xmod-train";
  inputs.settings.work_dir = "/var/xmod";
  inputs.settings.events_fd = 3;
  inputs.settings.control_fd = 4;
  return inputs;
}

TEST(LaunchPlanTest, SingleRankOnCpu) {
  LaunchInputs inputs = Inputs(11, 2, {MakeSlot(1, v1::CPU, 3)});
  v1::ResumePoint* resume = inputs.assignment.mutable_resume();
  resume->set_path("/ckpt/step-3.pt");
  resume->set_sha256("cc");
  resume->set_bytes(7);
  v1::ResumePoint* unverified = inputs.assignment.add_fallbacks();
  unverified->set_path("/ckpt/step-2.pt");
  v1::ResumePoint* fallback = inputs.assignment.add_fallbacks();
  fallback->set_path("/ckpt/step-1.pt");
  fallback->set_sha256("aa");
  // The worker's own variables come after the thread budget and replace it.
  inputs.settings.train_env = {{"OMP_WAIT_POLICY", "PASSIVE"}, {"MKL_NUM_THREADS", "1"}};
  EXPECT_EQ(LocalRanks(inputs.assignment), 1);
  ExpectGolden("single_rank_cpu", PlanLaunch(inputs));
}

TEST(LaunchPlanTest, TwoRanksOnOneWorker) {
  LaunchInputs inputs = Inputs(12, 1, {MakeSlot(0, v1::CPU, 2), MakeSlot(1, v1::CPU, 3)});
  inputs.assignment.mutable_spec()->mutable_training()->set_ranks(2);
  inputs.assignment.mutable_spec()->set_checkpoint_dir("/shared/ckpt/run-12");
  EXPECT_EQ(LocalRanks(inputs.assignment), 2);
  ExpectGolden("two_ranks_one_worker", PlanLaunch(inputs));
}

TEST(LaunchPlanTest, RanksTwoAndThreeOfAFourRankGang) {
  LaunchInputs inputs = Inputs(13, 3, {MakeSlot(0, v1::CPU, 4), MakeSlot(1, v1::CPU, 4)});
  v1::TrainingSpec* training = inputs.assignment.mutable_spec()->mutable_training();
  training->set_ranks(4);
  training->set_ranks_per_worker(2);
  training->set_threads(2);
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(member: 1
           members: 2
           rank_offset: 2
           world_size: 4
           rendezvous: "tcp://10.0.0.1:29500"
           host: "10.0.0.2")pb",
      inputs.assignment.mutable_gang()));
  EXPECT_EQ(LocalRanks(inputs.assignment), 2);
  ExpectGolden("gang_ranks_2_3_of_4", PlanLaunch(inputs));
}

TEST(LaunchPlanTest, GpuSlotsSeeOnlyTheirGpu) {
  LaunchInputs inputs = Inputs(14, 1, {MakeSlot(2, v1::CUDA, 8, 2), MakeSlot(3, v1::CUDA, 8, 3)});
  inputs.assignment.mutable_spec()->mutable_training()->set_ranks(2);
  ExpectGolden("two_ranks_cuda", PlanLaunch(inputs));
}

}  // namespace
}  // namespace xmod
