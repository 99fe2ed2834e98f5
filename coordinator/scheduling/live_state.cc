// See live_state.h.
#include "coordinator/scheduling/live_state.h"

#include <utility>

namespace xmod::scheduling {

ResumeCheckpoint ResumeCheckpointOf(const xmod::v1::Checkpoint& stored) {
  return ResumeCheckpoint{stored.step(), stored.path(), stored.sha256(), stored.bytes()};
}

xmod::v1::ResumePoint ResumePointOf(const ResumeCheckpoint& checkpoint) {
  xmod::v1::ResumePoint point;
  point.set_path(checkpoint.path);
  point.set_sha256(checkpoint.sha256);
  point.set_step(checkpoint.step);
  point.set_bytes(checkpoint.bytes);
  return point;
}

const Member* MemberOn(const AttemptEntry& attempt, int64_t worker_id) {
  for (const Member& member : attempt.members) {
    if (member.worker_id == worker_id) return &member;
  }
  return nullptr;
}

Member* MemberOn(AttemptEntry& attempt, int64_t worker_id) {
  return const_cast<Member*>(MemberOn(std::as_const(attempt), worker_id));
}

void NoteCheckpoint(RunEntry& run, const ResumeCheckpoint& recorded) {
  if (!run.latest_checkpoint || recorded.step >= run.latest_checkpoint->step) {
    if (run.latest_checkpoint && run.latest_checkpoint->step < recorded.step) {
      run.previous_checkpoint = run.latest_checkpoint;
    }
    run.latest_checkpoint = recorded;
  } else if (!run.previous_checkpoint || recorded.step > run.previous_checkpoint->step) {
    run.previous_checkpoint = recorded;
  }
}

void ResetCheckpoints(RunEntry& run, const std::vector<xmod::v1::Checkpoint>& recorded) {
  run.latest_checkpoint.reset();
  run.previous_checkpoint.reset();
  const size_t n = recorded.size();
  if (n >= 1) run.latest_checkpoint = ResumeCheckpointOf(recorded[n - 1]);
  if (n >= 2) run.previous_checkpoint = ResumeCheckpointOf(recorded[n - 2]);
}

}  // namespace xmod::scheduling
