// See agent.h. This file: supervising a started attempt — its events (progress, metrics,
// checkpoints, refused resume points), its outcome (trainer_contract/outcome.h) once the
// child exited, the deletion of the checkpoints the coordinator no longer needs, and the
// end of the attempt.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "trainer_contract/outcome.h"
#include "worker/agent.h"

namespace xmod {
namespace {

// A lexically normal form of `path` without a trailing '/'.
std::filesystem::path Normal(const std::string& path) {
  std::filesystem::path normal = std::filesystem::path(path).lexically_normal();
  return normal.has_filename() ? normal : normal.parent_path();
}

// Deletes the checkpoint `path` and its sidecar, which must be direct children of `dir`
// (lexically): the name is unlinked relative to `dir` opened without following a symlink
// (O_NOFOLLOW), and unlinkat never follows one in the name, so swapping a component for a
// symlink at any moment cannot make it delete anything outside `dir`. INVALID_ARGUMENT,
// deleting nothing, for a path elsewhere or a `dir` that is a symlink.
absl::Status RemoveInside(const std::string& path, const std::string& dir) {
  const std::filesystem::path file = Normal(path);
  const std::string name = file.filename().string();
  if (file.parent_path() != Normal(dir) || name.empty() || name == "." || name == ".." ||
      name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("path: ", path, " is not a file directly inside ", dir));
  }
  const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("path: cannot open ", dir, " (a folder, not a symlink): ", strerror(errno)));
  }
  absl::Status status;
  for (const std::string& entry : {name, name + ".sha256"}) {
    if (unlinkat(dir_fd, entry.c_str(), 0) != 0 && errno != ENOENT) {
      status.Update(absl::InternalError(
          absl::StrCat("cannot delete ", dir, "/", entry, ": ", strerror(errno))));
    }
  }
  close(dir_fd);
  return status;
}
// The report of a checkpoint the trainer wrote.
v1::ReportCheckpointRequest CheckpointReport(const v1::TrainerCheckpoint& cp) {
  v1::ReportCheckpointRequest request;
  request.set_step(cp.step());
  request.set_tokens(cp.tokens());
  request.set_flops(cp.flops());
  request.set_path(cp.path());
  request.set_sha256(cp.sha256());
  request.set_bytes(cp.bytes());
  return request;
}

// The report of a resume candidate the trainer refused, by the ResumePoint the coordinator
// sent (it knows the checkpoint by that); none for a path it did not send.
std::optional<v1::ReportCheckpointRequest> RefusedResumeReport(
    const v1::Assignment& assignment, const v1::TrainerResumeRejected& refused) {
  std::vector<v1::ResumePoint> sent(assignment.fallbacks().begin(), assignment.fallbacks().end());
  if (assignment.has_resume()) sent.push_back(assignment.resume());
  for (const v1::ResumePoint& point : sent) {
    if (point.path() != refused.path()) continue;
    v1::ReportCheckpointRequest request;
    request.set_step(point.step());
    request.set_path(point.path());
    request.set_sha256(point.sha256());
    request.set_rejected(refused.reason().empty() ? "refused" : refused.reason());
    return request;
  }
  return std::nullopt;
}

using StepPaths = std::vector<std::pair<int64_t, std::string>>;  // (step, path)

// The relay's refused checkpoints and the resume candidates the trainer rejected.
std::set<std::string> RefusedCheckpoints(std::set<std::string> refused,
                                         const std::vector<v1::ReportCheckpointRequest>& reports) {
  for (const v1::ReportCheckpointRequest& r : reports) {
    if (!r.rejected().empty()) refused.insert(r.path());
  }
  return refused;
}

// The assignment's candidates and the first `acked` reports (those not rejected).
StepPaths KnownCheckpoints(const v1::Assignment& assignment,
                           const std::vector<v1::ReportCheckpointRequest>& reports, size_t acked) {
  StepPaths known;
  if (assignment.has_resume() && !assignment.resume().path().empty()) {
    known.emplace_back(assignment.resume().step(), assignment.resume().path());
  }
  for (const v1::ResumePoint& p : assignment.fallbacks()) {
    known.emplace_back(p.step(), p.path());
  }
  for (size_t i = 0; i < acked; ++i) {
    if (reports[i].rejected().empty()) known.emplace_back(reports[i].step(), reports[i].path());
  }
  return known;
}

// The step from which known checkpoints stay: the two newest good ones stay (a fallback for
// a retry). None with fewer than two good ones.
std::optional<int64_t> KeepFromStep(const StepPaths& known, const std::set<std::string>& refused) {
  std::vector<int64_t> good;
  for (const auto& [step, path] : known) {
    if (refused.count(path) == 0) good.push_back(step);
  }
  if (good.size() < 2) return std::nullopt;
  std::sort(good.rbegin(), good.rend());
  return good[1];
}

}  // namespace

void Agent::Supervise(Attempt* attempt) {
  const AttemptKey key = attempt->key;
  const bool finished_event = RelayEvents(attempt);
  const ExitStatus exit = attempt->child->Wait();
  {
    absl::MutexLock lock(&mu_);
    attempt->exited = true;
  }
  const v1::FinishRunRequest finish = FinishRequest(attempt, exit, finished_event);
  LOG(INFO) << "run " << key.run_id << " attempt " << key.attempt << ": child " << exit.ToString()
            << " -> " << absl::AsciiStrToUpper(std::string(StoredOutcomeName(finish.outcome())));

  // Every point first, then the end of the attempt (the relay sends it after them). Once
  // abandoned, what is undelivered is kept for the next start (Wait).
  CollectCheckpoints(attempt, relay_.WaitDelivered(key, &abandon_));
  relay_.Finish(key, finish);
  relay_.WaitFinished(key, &abandon_);
  EndAttempt(key);
}

bool Agent::RelayEvents(Attempt* attempt) {
  const AttemptKey key = attempt->key;
  bool finished_event = false;
  while (true) {
    v1::TrainerEvent event;
    absl::StatusOr<bool> more = attempt->child->ReadEvent(&event);
    if (!more.ok()) {
      LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt << ": " << more.status();
      break;
    }
    if (!*more) break;
    NoteProgress(attempt, event);
    if (event.has_finished()) finished_event = true;
    RelayEvent(attempt, event);
  }
  return finished_event;
}

void Agent::NoteProgress(Attempt* attempt, const v1::TrainerEvent& event) {
  int64_t step = -1;  // the step the event shows the child at
  if (event.has_progress()) step = event.progress().step();
  if (event.has_metric()) step = event.metric().step();
  if (event.has_checkpoint()) step = event.checkpoint().step();
  if (!event.has_started() && step < 0) return;
  absl::MutexLock lock(&mu_);
  if (event.has_started() || step > attempt->last_step) {
    attempt->progress_ms = clock_->MonotonicMillis();
    attempt->last_step = std::max(attempt->last_step, step);
  }
}

void Agent::RelayEvent(Attempt* attempt, const v1::TrainerEvent& event) {
  const AttemptKey key = attempt->key;
  switch (event.event_case()) {
    case v1::TrainerEvent::kStarted:
      VLOG(1) << "run " << key.run_id << ": trainer started, steps planned "
              << event.started().steps_planned() << ", resumed from step "
              << event.started().resumed_from_step();
      break;
    case v1::TrainerEvent::kMetric:
      relay_.AddMetric(key, event.metric());
      break;
    case v1::TrainerEvent::kProgress: {
      absl::MutexLock lock(&mu_);
      attempt->progress = event.progress();
      break;
    }
    case v1::TrainerEvent::kCheckpoint:
      RelayCheckpoint(attempt, CheckpointReport(event.checkpoint()));
      break;
    case v1::TrainerEvent::kResumeRejected: {
      const v1::TrainerResumeRejected& refused = event.resume_rejected();
      LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt << ": trainer refused "
                   << refused.path() << ": " << refused.reason();
      std::optional<v1::ReportCheckpointRequest> report =
          RefusedResumeReport(attempt->assignment, refused);
      if (report.has_value()) RelayCheckpoint(attempt, *std::move(report));
      break;
    }
    case v1::TrainerEvent::kFinished:
      LOG(INFO) << "run " << key.run_id << " attempt " << key.attempt << ": finished, val/loss "
                << event.finished().final_val_loss() << ", " << event.finished().tokens_per_second()
                << " tokens/s";
      break;
    default:
      break;
  }
}

v1::FinishRunRequest Agent::FinishRequest(Attempt* attempt, const ExitStatus& exit,
                                          bool finished_event) {
  v1::FinishRunRequest finish;
  finish.set_run_id(attempt->key.run_id);
  finish.set_attempt(attempt->key.attempt);
  finish.set_exit_code(exit.AsExitCode());
  AttemptEnd end;
  end.exit_code = exit.code;
  end.signal = exit.signal;
  end.finished_event = finished_event;
  {
    absl::MutexLock lock(&mu_);
    end.stop_outcome = attempt->stop_outcome;
    end.stop_reason = attempt->stop_reason;
  }
  const AttemptOutcome decided = DecideOutcome(end);
  finish.set_outcome(decided.outcome);
  if (decided.error_source == OutcomeError::kTrainerFailure) {
    std::string tail = attempt->child->StderrTail();
    finish.set_error(tail.empty() ? absl::StrCat("xmod-train ", exit.ToString()) : tail);
    if (metrics_ != nullptr) metrics_->children_failed.Increment();
  } else {
    finish.set_error(decided.error);
  }
  if (options_.gpu_monitor != nullptr) {
    const int64_t peak = options_.gpu_monitor->Untrack(attempt->key);
    if (peak > 0) finish.set_peak_gpu_memory_bytes(peak);
  }
  return finish;
}

void Agent::EndAttempt(AttemptKey key) {
  std::unique_ptr<Attempt> done;
  {
    absl::MutexLock lock(&mu_);
    auto it = attempts_.find(key);
    done = std::move(it->second);
    attempts_.erase(it);
    for (int32_t slot : done->slots) busy_[slot] = false;
    UpdateSlotGaugesLocked();
    finished_threads_.push_back(std::move(done->thread));
  }
  // `done` (and the child) are destroyed here, before the thread ends.
}

void Agent::RelayCheckpoint(Attempt* attempt, v1::ReportCheckpointRequest request) {
  attempt->reports.push_back(request);
  relay_.AddCheckpoint(attempt->key, std::move(request));
  CollectCheckpoints(attempt, /*all_delivered=*/false);
}

void Agent::CollectCheckpoints(Attempt* attempt, bool all_delivered) {
  const std::vector<v1::ReportCheckpointRequest>& reports = attempt->reports;
  size_t acked = reports.size();
  if (!all_delivered) {
    // The relay reports in order and forgets a report once acknowledged. Staleness is read
    // after the count: a stale attempt's dropped reports must not look acknowledged.
    const size_t pending = relay_.pending_checkpoints(attempt->key);
    if (relay_.stale(attempt->key)) return;
    acked = reports.size() - std::min(pending, reports.size());
  }
  // What the coordinator holds: the assignment's candidates and the acknowledged reports,
  // less the candidates the trainer refused.
  const std::set<std::string> refused =
      RefusedCheckpoints(relay_.refused_checkpoints(attempt->key), reports);
  const StepPaths known = KnownCheckpoints(attempt->assignment, reports, acked);
  const std::optional<int64_t> keep_from = KeepFromStep(known, refused);
  if (!keep_from.has_value()) return;
  for (const auto& [step, path] : known) {
    if (step >= *keep_from || std::find(attempt->deleted.begin(), attempt->deleted.end(), path) !=
                                  attempt->deleted.end()) {
      continue;
    }
    attempt->deleted.push_back(path);
    if (absl::Status s = RemoveInside(path, attempt->checkpoint_dir); !s.ok()) {
      LOG(WARNING) << "run " << attempt->key.run_id << ": checkpoint not deleted: " << s;
      continue;
    }
    VLOG(1) << "run " << attempt->key.run_id << ": deleted checkpoint " << path;
  }
}
}  // namespace xmod
