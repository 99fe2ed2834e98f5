// See agent.h. This file: starting an attempt — the slots it takes, then its launch plan
// (launch_plan.h) carried out: the folder, the spec file, the rendezvous cleanup and the
// trainers, one per local rank.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "glog/logging.h"
#include "worker/agent.h"
#include "worker/launch_plan.h"
#include "worker/rank_group.h"

namespace xmod {
namespace {

LaunchSettings SettingsOf(const AgentOptions& options) {
  LaunchSettings settings;
  settings.train_bin = options.train_bin;
  settings.work_dir = options.work_dir;
  settings.train_env = options.train_env;
  settings.events_fd = options.events_fd;
  settings.control_fd = options.control_fd;
  return settings;
}

// Creates the plan's folders, writes its spec file and removes a stale FileStore.
absl::Status WriteAttemptFiles(const LaunchPlan& plan) {
  for (const std::string& dir : plan.dirs) {
    if (absl::Status status = MakeDirs(dir); !status.ok()) return status;
  }
  if (absl::Status status = WriteFileAtomic(plan.spec_path, plan.spec.SerializeAsString());
      !status.ok()) {
    return status;
  }
  if (plan.stale_rendezvous.empty()) return absl::OkStatus();
  std::error_code error;
  std::filesystem::remove(plan.stale_rendezvous, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot remove the stale rendezvous ",
                                            plan.stale_rendezvous, ": ", error.message()));
  }
  return absl::OkStatus();
}

// The log line of a started attempt.
void LogStarted(const v1::Assignment& assignment, const LaunchPlan& plan,
                const std::vector<int32_t>& slots, int pid) {
  const int ranks = static_cast<int>(plan.ranks.size());
  std::string gang;
  if (assignment.has_gang()) {
    gang = absl::StrCat(", gang member ", assignment.gang().member(), " of ",
                        assignment.gang().members(), " (ranks ", plan.rank_offset, "..",
                        plan.rank_offset + ranks - 1, " of ", plan.world_size, ", ",
                        plan.rendezvous, ")");
  }
  LOG(INFO) << "run " << assignment.run_id() << " attempt " << assignment.attempt()
            << ": started pid " << pid << " on slots " << absl::StrJoin(slots, ",") << " with "
            << (plan.ranks.empty() ? 0 : plan.ranks.back().threads) << " threads"
            << (ranks > 1 ? absl::StrCat(" per rank, ", ranks, " ranks") : "") << gang
            << (assignment.has_resume() ? ", resuming" : "");
}

}  // namespace

void Agent::StartAttempt(const v1::Assignment& assignment, int64_t lease_deadline_ms) {
  const AttemptKey key{assignment.run_id(), assignment.attempt()};
  v1::FinishRunRequest refusal;
  refusal.set_run_id(key.run_id);
  refusal.set_attempt(key.attempt);
  refusal.set_worker_id(worker_id());
  absl::StatusOr<std::vector<int32_t>> slots = ReserveSlots(assignment);
  if (!slots.ok()) {
    refusal.set_outcome(v1::OUTCOME_PREEMPTED);
    refusal.set_error(std::string(slots.status().message()));
    LOG(WARNING) << "run " << key.run_id << ": not started: " << refusal.error();
    relay_.Finish(key, refusal);
    return;
  }

  LaunchInputs inputs;
  inputs.assignment = assignment;
  for (int32_t slot : *slots) inputs.slots.push_back(slots_[slot]);
  inputs.lease_deadline_ms = lease_deadline_ms;
  inputs.settings = SettingsOf(options_);
  const LaunchPlan plan = PlanLaunch(inputs);
  for (const std::string& path : plan.unverified_resume) {
    // Nothing to verify it against: not a candidate (the others are still verified).
    LOG(WARNING) << "run " << key.run_id << ": not offering " << path << ": no digest recorded";
  }
  absl::Status status = WriteAttemptFiles(plan);
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      status.ok() ? StartRanks(plan.ranks) : absl::StatusOr<std::unique_ptr<ChildProcess>>(status);
  if (!child.ok()) {
    LOG(ERROR) << "run " << key.run_id << " attempt " << key.attempt
               << ": cannot start the trainer: " << child.status();
    if (metrics_ != nullptr) metrics_->children_failed.Increment();
    refusal.set_outcome(v1::OUTCOME_FAILED);
    refusal.set_exit_code(-1);
    refusal.set_error(
        absl::StrCat("xmod-worker could not start the trainer: ", child.status().ToString()));
    {
      absl::MutexLock lock(&mu_);
      for (int32_t slot : *slots) busy_[slot] = false;
      UpdateSlotGaugesLocked();
    }
    relay_.Finish(key, refusal);
    return;
  }
  LogStarted(assignment, plan, *slots, (*child)->pid());
  if (metrics_ != nullptr) metrics_->children_started.Increment();
  TrackGpus(key, *slots, (*child)->pid());
  relay_.Open(key);
  AddAttempt(assignment, plan, *std::move(child), *std::move(slots), lease_deadline_ms);
}

absl::StatusOr<std::vector<int32_t>> Agent::ReserveSlots(const v1::Assignment& assignment) {
  const int ranks = LocalRanks(assignment);
  std::vector<int32_t> slots;
  absl::MutexLock lock(&mu_);
  auto usable = [&](int32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return slot >= 0 && slot < static_cast<int32_t>(busy_.size()) && !busy_[slot] &&
           std::find(slots.begin(), slots.end(), slot) == slots.end();
  };
  for (int32_t slot : assignment.slots()) {
    if (static_cast<int>(slots.size()) < ranks && usable(slot)) slots.push_back(slot);
  }
  for (int32_t i = 0; i < static_cast<int32_t>(busy_.size()); ++i) {
    if (static_cast<int>(slots.size()) < ranks && usable(i)) slots.push_back(i);
  }
  if (draining_) return absl::UnavailableError("worker is draining");
  if (static_cast<int>(slots.size()) < ranks) {
    return absl::ResourceExhaustedError(absl::StrCat("the run needs ", ranks, " free slots, ",
                                                     slots.size(), " are free on the worker"));
  }
  for (int32_t slot : slots) busy_[slot] = true;  // reserved while the children start
  UpdateSlotGaugesLocked();
  return slots;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> Agent::StartRanks(
    const std::vector<RankLaunch>& ranks) {
  if (ranks.size() == 1) return launcher_->Start(ranks[0].launch);
  std::vector<std::unique_ptr<ChildProcess>> started;
  for (const RankLaunch& rank : ranks) {
    absl::StatusOr<std::unique_ptr<ChildProcess>> child = launcher_->Start(rank.launch);
    if (!child.ok()) {
      // The ranks already started would wait for this one until their timeout.
      for (std::unique_ptr<ChildProcess>& other : started) {
        other->Signal(SIGKILL);
        other->Wait();
      }
      return absl::Status(child.status().code(),
                          absl::StrCat("rank ", started.size(), ": ", child.status().message()));
    }
    started.push_back(*std::move(child));
  }
  return std::make_unique<RankGroup>(std::move(started));
}

void Agent::TrackGpus(AttemptKey key, const std::vector<int32_t>& slots, int pid) {
  if (options_.gpu_monitor == nullptr) return;
  std::vector<int> gpus;
  for (int32_t slot : slots) {
    if (slots_[slot].kind() == v1::CUDA) gpus.push_back(slots_[slot].device());
  }
  if (!gpus.empty()) options_.gpu_monitor->Track(key, std::move(gpus), {pid});
}

void Agent::AddAttempt(const v1::Assignment& assignment, const LaunchPlan& plan,
                       std::unique_ptr<ChildProcess> child, std::vector<int32_t> slots,
                       int64_t lease_deadline_ms) {
  absl::MutexLock lock(&mu_);
  auto attempt = std::make_unique<Attempt>();
  attempt->key = {assignment.run_id(), assignment.attempt()};
  attempt->assignment = assignment;
  attempt->checkpoint_dir = plan.spec.checkpoint_dir();
  attempt->child = std::move(child);
  attempt->slots = std::move(slots);
  attempt->lease_deadline_ms = lease_deadline_ms;
  attempt->progress_ms = clock_->MonotonicMillis();
  attempt->has_events = plan.rank_offset == 0;
  Attempt* raw = attempt.get();
  attempts_[raw->key] = std::move(attempt);
  raw->thread = std::thread([this, raw] { Supervise(raw); });
  // A drain that began while the child was starting preempts it too.
  if (draining_) StopLocked(*raw, v1::OUTCOME_PREEMPTED);
}

}  // namespace xmod
