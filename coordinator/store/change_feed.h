// ChangeFeed: tells watchers which runs changed, without polling the database. Writers call
// Publish() after their change committed; a watcher remembers the version it has seen and
// blocks in WaitForChanges() until a run of its sweep changes (or a timeout passes).
// A global version counter plus, per sweep, the version at which each run last changed.
// Thread-safe.
#ifndef XMOD_COORDINATOR_STORE_CHANGE_FEED_H_
#define XMOD_COORDINATOR_STORE_CHANGE_FEED_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace xmod {

class ChangeFeed {
 public:
  // Records that `run_id` of `sweep_id` changed (state, progress, counts) and wakes waiters.
  void Publish(int64_t sweep_id, int64_t run_id);
  // Wakes every waiter, e.g. at shutdown.
  void WakeAll();

  // The current version; a watcher starts from it before reading its snapshot.
  int64_t Version() const;

  struct Changes {
    int64_t version = 0;           // pass as `since` next time
    std::vector<int64_t> run_ids;  // runs of the sweep changed after `since`, ascending
  };
  // Blocks until a run of `sweep_id` changed after version `since`, WakeAll() is called or
  // `timeout` passes; run_ids is empty in the last two cases.
  Changes WaitForChanges(int64_t sweep_id, int64_t since, absl::Duration timeout);

 private:
  mutable absl::Mutex mu_;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t wake_all_ ABSL_GUARDED_BY(mu_) = 0;
  // sweep -> (run -> version of its last change)
  std::map<int64_t, std::map<int64_t, int64_t>> changed_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, int64_t> sweep_version_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_CHANGE_FEED_H_
