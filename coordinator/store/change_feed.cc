// See change_feed.h.
#include "coordinator/store/change_feed.h"

namespace xmod {

void ChangeFeed::Publish(int64_t sweep_id, int64_t run_id) {
  absl::MutexLock lock(&mu_);
  ++version_;
  changed_[sweep_id][run_id] = version_;
  sweep_version_[sweep_id] = version_;
}

void ChangeFeed::WakeAll() {
  absl::MutexLock lock(&mu_);
  ++wake_all_;
}

int64_t ChangeFeed::Version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

ChangeFeed::Changes ChangeFeed::WaitForChanges(int64_t sweep_id, int64_t since,
                                               absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const int64_t wake_all = wake_all_;
  const auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = sweep_version_.find(sweep_id);
    return wake_all_ != wake_all || (it != sweep_version_.end() && it->second > since);
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  Changes changes;
  changes.version = version_;
  auto it = changed_.find(sweep_id);
  if (it != changed_.end()) {
    for (const auto& [run_id, version] : it->second) {
      if (version > since) changes.run_ids.push_back(run_id);
    }
  }
  return changes;
}

}  // namespace xmod
