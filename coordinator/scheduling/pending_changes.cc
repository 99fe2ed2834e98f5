// See pending_changes.h.
#include "coordinator/scheduling/pending_changes.h"

namespace xmod::scheduling {

void PendingChanges::Save(const LiveState& live, int64_t run_id) {
  if (runs_.count(run_id) > 0) return;
  auto it = live.runs.find(run_id);
  runs_[run_id] = it == live.runs.end() ? std::nullopt : std::optional<RunEntry>(it->second);
}

void PendingChanges::Save(const LiveState& live, const AttemptKey& key) {
  if (attempts_.count(key) > 0) return;
  auto it = live.attempts.find(key);
  attempts_[key] =
      it == live.attempts.end() ? std::nullopt : std::optional<AttemptEntry>(it->second);
}

bool PendingChanges::Restore(LiveState& live) const {
  bool requeued = false;
  for (const auto& [run_id, saved] : runs_) {
    auto it = live.runs.find(run_id);
    if (it != live.runs.end()) {
      live.queue.erase(QueueKeyOf(run_id, it->second));
      live.runs.erase(it);
    }
    if (saved) {
      live.runs[run_id] = *saved;
      if (saved->state == xmod::v1::QUEUED) {
        live.queue.insert(QueueKeyOf(run_id, *saved));
        requeued = true;
      }
    }
  }
  for (const auto& [key, saved] : attempts_) {
    if (saved) {
      live.attempts[key] = *saved;
    } else {
      live.attempts.erase(key);
    }
  }
  return requeued;
}

}  // namespace xmod::scheduling
