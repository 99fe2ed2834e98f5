// Launch plan: everything the worker decides before it starts an attempt's trainers
// (docs/worker-trainer-contract.md, "Starting a trainer" and "Several ranks") — the attempt's
// folder and spec file, the rendezvous, and per local rank the command line
// (trainer_contract/trainer_args.h), the environment (trainer_contract/trainer_env.h), the
// slot and the log file. A pure function of the assignment, the slots chosen for it and the
// worker's settings: it reads no file, clock or lock and starts nothing; the agent carries
// the plan out (agent.h).
//
//   ranks W: training.ranks (0 = 1), or ranks_per_worker for a gang's part; local rank r
//   runs global rank rank_offset + r of world_size (W for a run on this worker alone) on
//   slots[r], with --rendezvous <attempt folder>/rdzv (a FileStore, removed before the
//   start) or the gang's tcp://HOST:PORT and --dist_host the worker's advertised address.
//   Only global rank 0 writes events. Threads: training.threads, else the slot's cores. A
//   CUDA slot runs --device cuda:0 with CUDA_VISIBLE_DEVICES its GPU (and nccl for W > 1).
//
// Thread-safe (no state).
#ifndef XMOD_WORKER_LAUNCH_PLAN_H_
#define XMOD_WORKER_LAUNCH_PLAN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "worker/process_supervisor.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

// The worker's side of a launch (AgentOptions).
struct LaunchSettings {
  std::string train_bin;  // the xmod-train executable
  std::string work_dir;   // per-attempt folders
  // KEY=VALUE pairs added to every trainer's environment, after the thread budget (a
  // variable given here replaces the worker's value).
  std::vector<std::pair<std::string, std::string>> train_env;
  int events_fd = 3;   // descriptor number of the event pipe in the child
  int control_fd = 4;  // descriptor number of the lease control channel
};

struct LaunchInputs {
  v1::Assignment assignment;
  // The slots the attempt runs on, one per local rank (LocalRanks of them), in rank order.
  std::vector<v1::Slot> slots;
  int64_t lease_deadline_ms = 0;  // monotonic, the children's --lease_deadline_ms
  LaunchSettings settings;
};

// One local rank's process.
struct RankLaunch {
  int32_t slot = 0;     // the slot's index
  int global_rank = 0;  // rank_offset + local rank
  int threads = 0;      // its --threads
  // argv[0] = the trainer; env sorted by name, each name once (the value that applies).
  LaunchOptions launch;
};

struct LaunchPlan {
  std::string attempt_dir;  // <work_dir>/run-<id>-a<attempt>
  // Folders to create (the attempt's, the run's checkpoint folder), then `spec` written to
  // spec_path.
  std::vector<std::string> dirs;
  std::string spec_path;
  v1::RunSpec spec;  // the assignment's, with run_id, attempt and checkpoint_dir filled in
  // A FileStore left by an earlier start, to remove before the start ("" = none): it would
  // hold that start's keys.
  std::string stale_rendezvous;
  std::string rendezvous;  // the ranks' --rendezvous (used when world_size > 1)
  int rank_offset = 0;     // the global rank of local rank 0
  int world_size = 1;      // ranks of the attempt on every worker
  // Resume candidates not offered: no digest was recorded to verify them against.
  std::vector<std::string> unverified_resume;
  std::vector<RankLaunch> ranks;  // by local rank
};

// The number of local ranks (and slots) an assignment runs here.
int LocalRanks(const v1::Assignment& assignment);

// The plan for `inputs`; inputs.slots must hold LocalRanks(inputs.assignment) slots.
LaunchPlan PlanLaunch(const LaunchInputs& inputs);

}  // namespace xmod

#endif  // XMOD_WORKER_LAUNCH_PLAN_H_
