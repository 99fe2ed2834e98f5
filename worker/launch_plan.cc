// See launch_plan.h.
#include "worker/launch_plan.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "trainer_contract/trainer_args.h"
#include "trainer_contract/trainer_env.h"

namespace xmod {
namespace {

// The resume candidates the trainers get (newest first, each with its recorded digest) and
// those left out for want of one (the others are still verified).
void AddResumeCandidates(const v1::Assignment& assignment, TrainerArgs* args,
                         std::vector<std::string>* unverified) {
  std::vector<v1::ResumePoint> candidates;
  if (assignment.has_resume() && !assignment.resume().path().empty()) {
    candidates.push_back(assignment.resume());
  }
  candidates.insert(candidates.end(), assignment.fallbacks().begin(), assignment.fallbacks().end());
  for (const v1::ResumePoint& candidate : candidates) {
    if (candidate.sha256().empty()) {
      unverified->push_back(candidate.path());
      continue;
    }
    args->resume.push_back(candidate.path());
    args->resume_sha256.push_back(candidate.sha256());
    args->resume_bytes.push_back(candidate.bytes());
  }
}

// Local rank `rank`'s process; `shared` holds the arguments every rank gets.
RankLaunch PlanRank(const LaunchInputs& inputs, const LaunchPlan& plan, const TrainerArgs& shared,
                    int rank) {
  const LaunchSettings& settings = inputs.settings;
  const v1::Slot& slot = inputs.slots[rank];
  RankLaunch out;
  out.slot = slot.index();
  out.global_rank = plan.rank_offset + rank;
  out.threads = std::max(
      plan.spec.training().threads() > 0 ? plan.spec.training().threads() : slot.cores(), 1);
  TrainerArgs args = shared;
  if (args.world_size > 1) args.rank = out.global_rank;
  args.events_fd = out.global_rank == 0 ? settings.events_fd : -1;
  args.threads = out.threads;
  std::map<std::string, std::string> env;
  if (slot.kind() == v1::CUDA) {
    args.device = "cuda:0";  // the slot's GPU, the only one CUDA_VISIBLE_DEVICES shows
    if (args.world_size > 1) args.backend = "nccl";
    env[kEnvCudaVisibleDevices] = absl::StrCat(slot.device());
  }
  env[kEnvOmpNumThreads] = absl::StrCat(out.threads);
  env[kEnvMklNumThreads] = absl::StrCat(out.threads);
  // OMP_WAIT_POLICY stays libgomp's default (spin briefly, then sleep), or the worker's
  // own: with every thread in one OpenMP pool that is the faster one (docs/design.md,
  // "Threads on CPU").
  for (const auto& [name, value] : settings.train_env) env[name] = value;
  out.launch.argv = args.ToArgv();
  out.launch.argv.insert(out.launch.argv.begin(), settings.train_bin);
  out.launch.env.assign(env.begin(), env.end());
  out.launch.log_path = rank == 0 ? plan.attempt_dir + "/train.log"
                                  : absl::StrCat(plan.attempt_dir, "/train.rank", rank, ".log");
  out.launch.events_fd = settings.events_fd;
  out.launch.control_fd = settings.control_fd;
  return out;
}

}  // namespace

int LocalRanks(const v1::Assignment& assignment) {
  return assignment.has_gang() ? assignment.spec().training().ranks_per_worker()
                               : std::max(1, assignment.spec().training().ranks());
}

LaunchPlan PlanLaunch(const LaunchInputs& inputs) {
  const v1::Assignment& assignment = inputs.assignment;
  const LaunchSettings& settings = inputs.settings;
  const bool gang = assignment.has_gang();
  const int ranks = LocalRanks(assignment);
  LaunchPlan plan;
  plan.attempt_dir =
      absl::StrCat(settings.work_dir, "/run-", assignment.run_id(), "-a", assignment.attempt());
  plan.spec = assignment.spec();
  plan.spec.set_run_id(assignment.run_id());
  plan.spec.set_attempt(assignment.attempt());
  if (plan.spec.checkpoint_dir().empty()) {
    plan.spec.set_checkpoint_dir(
        absl::StrCat(settings.work_dir, "/run-", assignment.run_id(), "/checkpoints"));
  }
  plan.dirs = {plan.attempt_dir, plan.spec.checkpoint_dir()};
  plan.spec_path = plan.attempt_dir + "/spec.pb";
  // A gang meets at member 0's TCPStore; ranks on this worker alone at a FileStore here.
  plan.rendezvous = gang ? assignment.gang().rendezvous() : plan.attempt_dir + "/rdzv";
  if (!gang && ranks > 1) plan.stale_rendezvous = plan.rendezvous;

  TrainerArgs shared;
  shared.spec = plan.spec_path;
  shared.lease_deadline_ms = inputs.lease_deadline_ms;
  shared.lease_fd = settings.control_fd;
  AddResumeCandidates(assignment, &shared, &plan.unverified_resume);
  // This worker's ranks are rank_offset .. rank_offset + W - 1 of world_size.
  plan.rank_offset = gang ? assignment.gang().rank_offset() : 0;
  plan.world_size = gang ? assignment.gang().world_size() : ranks;
  if (plan.world_size > 1) {
    shared.world_size = plan.world_size;
    shared.rendezvous = plan.rendezvous;
  }
  // A gang's members reach this host at its advertised address; ranks on this worker alone
  // meet on loopback, whatever the hostname resolves to (a sandbox may drop other traffic).
  if (gang) {
    shared.dist_host = assignment.gang().host();
  } else if (ranks > 1) {
    shared.dist_host = "127.0.0.1";
  }
  for (int rank = 0; rank < ranks; ++rank) {
    plan.ranks.push_back(PlanRank(inputs, plan, shared, rank));
  }
  return plan;
}

}  // namespace xmod
