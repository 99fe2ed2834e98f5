// PendingChanges: the in-memory rollback of the scheduler (scheduler.h, "State"). An
// operation saves each run and attempt entry before it changes it; if the commit of its
// database writes fails, Restore puts the saved entries back, so memory stays as the
// database has it.
#ifndef XMOD_COORDINATOR_SCHEDULING_PENDING_CHANGES_H_
#define XMOD_COORDINATOR_SCHEDULING_PENDING_CHANGES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/scheduling/live_state.h"

namespace xmod::scheduling {

class PendingChanges {
 public:
  // Saves the entry (present or not) the first time it is named.
  void Save(const LiveState& live, int64_t run_id);
  void Save(const LiveState& live, const AttemptKey& key);
  // Notes a run that stops running once the change commits (the running-runs gauge).
  void RunEnded(const std::string& name) { ended_runs_.push_back(name); }
  const std::vector<std::string>& ended_runs() const { return ended_runs_; }
  // The entries saved, as they were before the change (nullopt: not in memory).
  const std::map<int64_t, std::optional<RunEntry>>& saved_runs() const { return runs_; }
  const std::map<AttemptKey, std::optional<AttemptEntry>>& saved_attempts() const {
    return attempts_;
  }

  // Puts every saved entry back into `live`, the queue with it. Returns whether a run was
  // queued again (the caller wakes its polls).
  bool Restore(LiveState& live) const;

 private:
  std::map<int64_t, std::optional<RunEntry>> runs_;  // nullopt: the run was not in memory
  std::map<AttemptKey, std::optional<AttemptEntry>> attempts_;
  std::vector<std::string> ended_runs_;
};

}  // namespace xmod::scheduling

#endif  // XMOD_COORDINATOR_SCHEDULING_PENDING_CHANGES_H_
