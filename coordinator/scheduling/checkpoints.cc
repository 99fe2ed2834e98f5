// See scheduler.h. This file: checkpoints a run's current attempt reports — recorded as the
// run's resume point (the newest two kept), or, when its trainer refused one at resume,
// forgotten with the fallback noted — and the checks of the reported path.
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/confined_path.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/store/event_rows.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/store_writes.h"
#include "glog/logging.h"

namespace xmod {

using scheduling::RunEntry;

absl::Status Scheduler::CheckCurrentLocked(const xmod::v1::ReportCheckpointRequest& request) const {
  auto attempt = live_.attempts.find(AttemptKey{request.run_id(), request.attempt()});
  auto run = live_.runs.find(request.run_id());
  if (attempt == live_.attempts.end() || run == live_.runs.end() ||
      run->second.current_attempt != request.attempt() ||
      attempt->second.members.front().worker_id != request.worker_id()) {
    return absl::FailedPreconditionError(absl::StrCat("attempt ", request.attempt(), " of run ",
                                                      request.run_id(), " is not current"));
  }
  return absl::OkStatus();
}

absl::Status Scheduler::CheckReportedPath(const xmod::v1::ReportCheckpointRequest& request) {
  int64_t sweep_id = 0;
  {
    // A stale attempt hears that it is stale (and its worker stops it), not that its path is
    // wrong, which a worker takes as a refusal of that one report.
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckCurrentLocked(request); !s.ok()) return s;
    sweep_id = live_.runs.at(request.run_id()).sweep_id;
  }
  // The file-system checks run outside the lock: the folder may be on network storage.
  const std::string dir = CheckpointDir(sweep_id, request.run_id());
  absl::Status status = CheckPathUnder("path", request.path(), dir);
  if (status.ok()) status = CheckFileUnder("path", request.path(), dir, request.bytes());
  return status;
}

std::future<absl::Status> Scheduler::RejectCheckpointLocked(
    const xmod::v1::ReportCheckpointRequest& request, int64_t now,
    std::shared_ptr<std::vector<xmod::v1::Checkpoint>> remaining) {
  // The trainer refused a resume candidate and goes on to the next one offered: the
  // newest recorded checkpoint older than it, or a fresh start when none is left.
  const AttemptKey key{request.run_id(), request.attempt()};
  const RunEntry& r = live_.runs.at(request.run_id());
  int64_t next = 0;
  for (const std::optional<scheduling::ResumeCheckpoint>* c :
       {&r.latest_checkpoint, &r.previous_checkpoint}) {
    if (c->has_value() && (*c)->path != request.path() && (*c)->step < request.step()) {
      next = std::max(next, (*c)->step);
    }
  }
  const std::string note =
      absl::StrCat("checkpoint at step ", request.step(), " (", request.path(),
                   ") refused at resume: ", request.rejected(), "; ",
                   next > 0 ? absl::StrCat("resumed from step ", next)
                            : std::string("no older checkpoint, started from scratch"));
  LOG(WARNING) << "run " << key.first << " attempt " << key.second << ": " << note;
  return store_->Write(
      [key, path = request.path(), next, note, now, sweep_id = r.sweep_id, remaining](Db& db) {
        if (absl::Status s = DeleteCheckpoint(db, key.first, path); !s.ok()) return s;
        if (absl::Status s = NoteResumeFallback(db, key.first, key.second, next, note); !s.ok()) {
          return s;
        }
        absl::StatusOr<std::vector<xmod::v1::Checkpoint>> left = LoadCheckpoints(db, key.first);
        if (!left.ok()) return left.status();
        *remaining = *std::move(left);
        return InsertEvent(db, now, xmod::v1::EVENT_CHECKPOINT_REJECTED, sweep_id, key.first,
                           absl::StrCat("attempt ", key.second, ": ", note));
      });
}

std::future<absl::Status> Scheduler::RecordCheckpointLocked(
    const xmod::v1::ReportCheckpointRequest& request, int64_t now) {
  const AttemptKey key{request.run_id(), request.attempt()};
  xmod::v1::Checkpoint c;
  c.set_step(request.step());
  c.set_tokens(request.tokens());
  c.set_flops(request.flops());
  c.set_path(request.path());
  c.set_sha256(request.sha256());
  c.set_bytes(request.bytes());
  return store_->Write([key, c, now, sweep_id = live_.runs.at(key.first).sweep_id](Db& db) {
    if (absl::Status s = InsertCheckpoint(db, key.first, key.second, c, now); !s.ok()) return s;
    // The worker deletes the files of older ones once this report is acknowledged.
    if (absl::Status s = KeepNewestCheckpoints(db, key.first, 2); !s.ok()) return s;
    return InsertEvent(db, now, xmod::v1::EVENT_CHECKPOINT, sweep_id, key.first,
                       absl::StrCat("attempt ", key.second, " step ", c.step(), ": ", c.path()));
  });
}

absl::Status Scheduler::ReportCheckpoint(const xmod::v1::ReportCheckpointRequest& request) {
  if (request.path().empty()) return absl::InvalidArgumentError("path: must not be empty");
  if (request.step() < 0) return absl::InvalidArgumentError("step: must be >= 0");
  const bool rejected = !request.rejected().empty();
  if (!rejected) {
    if (absl::Status s = CheckReportedPath(request); !s.ok()) return s;
  }
  const int64_t now = clock_->NowMillis();
  std::future<absl::Status> done;
  // After a refusal: the run's recorded checkpoints left, by step (read in the transaction).
  auto remaining = std::make_shared<std::vector<xmod::v1::Checkpoint>>();
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckCurrentLocked(request); !s.ok()) return s;
    done = rejected ? RejectCheckpointLocked(request, now, remaining)
                    : RecordCheckpointLocked(request, now);
  }
  if (absl::Status s = done.get(); !s.ok()) return s;
  // The resume point and its fallback move once the database holds the change.
  absl::MutexLock lock(&mu_);
  auto run = live_.runs.find(request.run_id());
  if (run == live_.runs.end()) return absl::OkStatus();
  if (rejected) {
    // The next retry's candidates: the two newest checkpoints still recorded.
    scheduling::ResetCheckpoints(run->second, *remaining);
  } else {
    scheduling::NoteCheckpoint(run->second,
                               {request.step(), request.path(), request.sha256(), request.bytes()});
    auto attempt = live_.attempts.find({request.run_id(), request.attempt()});
    if (attempt != live_.attempts.end()) {
      attempt->second.checkpointed_ms = clock_->MonotonicMillis();
    }
  }
  return absl::OkStatus();
}

}  // namespace xmod
