// RankGroup: the W xmod-train processes ("ranks") of one data-parallel attempt, supervised as
// one ChildProcess (process_supervisor.h), so the agent treats a multi-rank attempt like a
// single child.
//
// - Events come from rank 0 only (the trainer's contract: only rank 0 writes them).
// - A rank that fails (killed by a signal, or an exit code other than 0 and 75) fails the
//   group: the other ranks are sent SIGKILL at once. They could not finish a step without
//   their peer (they would block in a collective until --dist_timeout_s), and only rank 0
//   writes checkpoints, atomically, so nothing of value is lost. Exit 75 is not a failure:
//   a SIGTERM to any rank makes every rank checkpoint and exit 75 after the same step.
// - Wait() returns once every rank has exited: the first failing rank's status if one
//   failed, else rank 0's. StderrTail() is the failing rank's tail prefixed "rank r of W: ",
//   followed by the tails of other ranks that failed on their own (not killed by the group),
//   else rank 0's as it is. pid() is rank 0's; Signal() and ExtendLease() reach every rank.
//
// Thread-safety: as ChildProcess — ReadEvent from one thread; Wait, Poll, Signal and
// StderrTail from any threads. One watcher thread per rank runs from construction until
// that rank exits; the destructor SIGKILLs ranks still running and joins them.
#ifndef XMOD_WORKER_RANK_GROUP_H_
#define XMOD_WORKER_RANK_GROUP_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/process_supervisor.h"

namespace xmod {

// Exit code of a rank stopped by SIGTERM after its checkpoint (model/train/main.cc).
inline constexpr int kTrainerPreemptedExit = 75;

class RankGroup : public ChildProcess {
 public:
  // `ranks[r]` is rank r; at least one. Starts watching them at once.
  explicit RankGroup(std::vector<std::unique_ptr<ChildProcess>> ranks);
  ~RankGroup() override;
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  int pid() const override;
  absl::StatusOr<bool> ReadEvent(v1::TrainerEvent* event) override;
  ExitStatus Wait() override;
  std::optional<ExitStatus> Poll() override;
  void Signal(int signo) override;
  std::string StderrTail() override;
  // Reaches every rank: each enforces the deadline itself.
  void ExtendLease(int64_t deadline_ms) override;

  // The rank whose failure ended the group, if any (set once that rank exited).
  std::optional<int> failed_rank();

 private:
  void Watch(int rank);

  const std::vector<std::unique_ptr<ChildProcess>> ranks_;
  absl::Mutex mu_;
  std::vector<std::optional<ExitStatus>> exits_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> killed_ ABSL_GUARDED_BY(mu_);  // sent SIGKILL because a peer failed
  std::optional<int> failed_rank_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> watchers_;
};

}  // namespace xmod

#endif  // XMOD_WORKER_RANK_GROUP_H_
