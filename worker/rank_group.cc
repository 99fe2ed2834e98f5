// See rank_group.h.
#include "worker/rank_group.h"

#include <signal.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace xmod {
namespace {

// Whether a rank's end is a failure of the run (not success, not the SIGTERM checkpoint exit).
bool IsFailure(const ExitStatus& exit) {
  return exit.signal != 0 || (exit.code != 0 && exit.code != kTrainerPreemptedExit);
}

}  // namespace

RankGroup::RankGroup(std::vector<std::unique_ptr<ChildProcess>> ranks) : ranks_(std::move(ranks)) {
  CHECK(!ranks_.empty()) << "a rank group needs at least one rank";
  {
    absl::MutexLock lock(&mu_);
    exits_.resize(ranks_.size());
    killed_.assign(ranks_.size(), false);
    running_ = static_cast<int>(ranks_.size());
  }
  for (size_t r = 0; r < ranks_.size(); ++r) {
    watchers_.emplace_back([this, r] { Watch(static_cast<int>(r)); });
  }
}

RankGroup::~RankGroup() {
  {
    absl::MutexLock lock(&mu_);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (!exits_[r].has_value()) ranks_[r]->Signal(SIGKILL);
    }
  }
  for (std::thread& watcher : watchers_) watcher.join();
}

void RankGroup::Watch(int rank) {
  const ExitStatus exit = ranks_[rank]->Wait();
  std::vector<int> to_kill;
  {
    absl::MutexLock lock(&mu_);
    exits_[rank] = exit;
    running_ -= 1;
    if (IsFailure(exit) && !failed_rank_.has_value()) {
      failed_rank_ = rank;
      for (size_t r = 0; r < ranks_.size(); ++r) {
        if (!exits_[r].has_value()) {
          killed_[r] = true;
          to_kill.push_back(static_cast<int>(r));
        }
      }
    }
  }
  if (!to_kill.empty()) {
    LOG(WARNING) << "rank " << rank << " of " << ranks_.size() << " (pid " << ranks_[rank]->pid()
                 << ") " << exit.ToString() << ": killing the " << to_kill.size()
                 << " ranks still running";
  }
  for (int r : to_kill) ranks_[r]->Signal(SIGKILL);
}

int RankGroup::pid() const { return ranks_[0]->pid(); }

absl::StatusOr<bool> RankGroup::ReadEvent(v1::TrainerEvent* event) {
  return ranks_[0]->ReadEvent(event);
}

ExitStatus RankGroup::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* running) { return *running == 0; }, &running_));
  return *exits_[failed_rank_.value_or(0)];
}

std::optional<ExitStatus> RankGroup::Poll() {
  absl::MutexLock lock(&mu_);
  if (running_ > 0) return std::nullopt;
  return *exits_[failed_rank_.value_or(0)];
}

void RankGroup::Signal(int signo) {
  for (const std::unique_ptr<ChildProcess>& rank : ranks_) rank->Signal(signo);
}

void RankGroup::ExtendLease(int64_t deadline_ms) {
  for (const std::unique_ptr<ChildProcess>& rank : ranks_) rank->ExtendLease(deadline_ms);
}

std::string RankGroup::StderrTail() {
  std::optional<int> failed;
  std::vector<bool> own_failures(ranks_.size(), false);
  {
    absl::MutexLock lock(&mu_);
    failed = failed_rank_;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      own_failures[r] = exits_[r].has_value() && IsFailure(*exits_[r]) && !killed_[r];
    }
  }
  if (!failed.has_value()) return ranks_[0]->StderrTail();
  // The first failing rank, then any other rank that failed on its own (a peer may notice
  // the loss and fail before being killed: its text says so, the first rank's says why).
  const int world = static_cast<int>(ranks_.size());
  std::string text =
      absl::StrCat("rank ", *failed, " of ", world, ": ", ranks_[*failed]->StderrTail());
  for (int r = 0; r < world; ++r) {
    if (r == *failed || !own_failures[r]) continue;
    absl::StrAppend(&text, "\nrank ", r, " of ", world, ": ", ranks_[r]->StderrTail());
  }
  return text;
}

std::optional<int> RankGroup::failed_rank() {
  absl::MutexLock lock(&mu_);
  return failed_rank_;
}

}  // namespace xmod
