// See user_actions.h.
#include "coordinator/api/user_actions.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/api/ownership.h"
#include "coordinator/api/user_queries.h"
#include "coordinator/fitting/fit_trigger.h"
#include "coordinator/fitting/studies.h"
#include "coordinator/fitting/study_sharing.h"
#include "coordinator/store/event_rows.h"
#include "coordinator/store/sharing_rows.h"
#include "glog/logging.h"

namespace xmod {

std::optional<std::string> ActorOf(const Principal& caller) { return caller.name; }

UserActions::UserActions(Store* store, Scheduler* scheduler, FitTrigger* fit_trigger)
    : store_(store), scheduler_(scheduler), fit_trigger_(fit_trigger) {}

absl::Status UserActions::CheckSweep(absl::string_view method, const Principal& caller,
                                     int64_t sweep_id) {
  absl::StatusOr<OwnedWork> work =
      store_->ReadValue([&](Db& db) { return SweepWork(db, sweep_id); });
  if (!work.ok()) return work.status();
  return CheckMayChange(method, caller, *work, scheduler_->options().sharing);
}

absl::Status UserActions::CheckRun(absl::string_view method, const Principal& caller,
                                   int64_t run_id) {
  absl::StatusOr<OwnedWork> work = store_->ReadValue([&](Db& db) { return RunWork(db, run_id); });
  if (!work.ok()) return work.status();
  return CheckMayChange(method, caller, *work, scheduler_->options().sharing);
}

absl::StatusOr<xmod::v1::Run> UserActions::ReadRun(int64_t run_id) {
  xmod::v1::GetRunRequest request;
  request.set_run_id(run_id);
  absl::StatusOr<xmod::v1::GetRunResponse> run = GetRun(*store_, request);
  if (!run.ok()) return run.status();
  return std::move(*run->mutable_run());
}

absl::StatusOr<xmod::v1::Sweep> UserActions::CancelSweep(absl::string_view method,
                                                         const Principal& caller,
                                                         int64_t sweep_id) {
  if (absl::Status s = CheckSweep(method, caller, sweep_id); !s.ok()) return s;
  if (absl::Status s = scheduler_->CancelSweep(sweep_id, ActorOf(caller)); !s.ok()) return s;
  if (fit_trigger_ != nullptr) fit_trigger_->CancelFit(sweep_id);
  xmod::v1::GetSweepRequest sweep;
  sweep.set_sweep_id(sweep_id);
  return GetSweep(*store_, sweep);
}

absl::StatusOr<xmod::v1::RetryFailedResponse> UserActions::RetryFailed(absl::string_view method,
                                                                       const Principal& caller,
                                                                       int64_t sweep_id) {
  if (absl::Status s = CheckSweep(method, caller, sweep_id); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> ids = scheduler_->RetryFailed(sweep_id, ActorOf(caller));
  if (!ids.ok()) return ids.status();
  xmod::v1::RetryFailedResponse response;
  for (int64_t id : *ids) response.add_run_ids(id);
  return response;
}

absl::StatusOr<xmod::v1::Run> UserActions::CancelRun(absl::string_view method,
                                                     const Principal& caller, int64_t run_id) {
  if (absl::Status s = CheckRun(method, caller, run_id); !s.ok()) return s;
  if (absl::Status s = scheduler_->CancelRun(run_id, ActorOf(caller)); !s.ok()) return s;
  return ReadRun(run_id);
}

absl::StatusOr<xmod::v1::Run> UserActions::ResumeRun(absl::string_view method,
                                                     const Principal& caller, int64_t run_id) {
  if (absl::Status s = CheckRun(method, caller, run_id); !s.ok()) return s;
  if (absl::Status s = scheduler_->ResumeRun(run_id, ActorOf(caller)); !s.ok()) return s;
  return ReadRun(run_id);
}

namespace {

// Why a study's linked run is not trained: "linked to run 4 of sweep 1 (study b4)".
absl::StatusOr<std::string> LinkReason(Db& db, const SharedRunRow& link, const std::string& study) {
  absl::StatusOr<RunOwnerRow> trained = LoadRunOwner(db, link.trained_run_id);
  if (!trained.ok()) return trained.status();
  return absl::StrCat("linked to run ", link.trained_run_id, " of sweep ", trained->sweep_id,
                      " (study ", study, ")");
}

// The study's answer counts (Study.listed_observations, ...) from its sharing plan.
void SetCounts(const StudySharing& sharing, xmod::v1::Study* study) {
  study->set_listed_observations(sharing.listed_observations);
  study->set_in_range_observations(sharing.in_range_observations);
  study->set_shared_runs(static_cast<int>(sharing.links.size()));
}

// A dry run's answer: the resolved spec and its counts; nothing stored.
absl::StatusOr<xmod::v1::Study> CountStudy(Db& db, const xmod::v1::StudySpec& spec,
                                           int max_bootstrap_samples) {
  xmod::v1::Study study;
  absl::StatusOr<xmod::v1::StudySpec> resolved = ResolveStudy(db, spec, max_bootstrap_samples);
  if (!resolved.ok()) return resolved.status();
  *study.mutable_spec() = *std::move(resolved);
  absl::StatusOr<StudySharing> sharing = PlanSharedRuns(db, study.spec(), 0);
  if (!sharing.ok()) return sharing.status();
  SetCounts(*sharing, &study);
  return study;
}

// Each member sweep of the stored `study` is `caller`'s to change (else PERMISSION_DENIED);
// an EVENT_STUDY_CREATED event for each.
absl::Status CheckAndRecordMembers(Db& db, absl::string_view method, const Principal& caller,
                                   const scheduling::SharingPolicy& policy,
                                   const xmod::v1::Study& study, int64_t now_ms) {
  for (const xmod::v1::StudyMember& member : study.spec().members()) {
    absl::StatusOr<OwnedWork> work = SweepWork(db, member.sweep_id());
    if (!work.ok()) return work.status();
    if (absl::Status s = CheckMayChange(method, caller, *work, policy); !s.ok()) return s;
    if (absl::Status s =
            InsertEvent(db, now_ms, xmod::v1::EVENT_STUDY_CREATED, member.sweep_id(), 0,
                        absl::StrCat("study ", study.spec().name(), " (role ", member.role(), ")"),
                        ActorOf(caller));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Links the study's shared runs with an EVENT_RUN_LINKED event each; the linked runs, with why
// they are not trained, go to `to_cancel`.
absl::Status LinkSharedRuns(Db& db, const std::optional<std::string>& actor, int64_t now_ms,
                            xmod::v1::Study* study,
                            std::vector<std::pair<int64_t, std::string>>* to_cancel) {
  absl::StatusOr<StudySharing> sharing = PlanSharedRuns(db, study->spec(), study->id());
  if (!sharing.ok()) return sharing.status();
  SetCounts(*sharing, study);
  if (absl::Status s = StoreSharedRuns(db, sharing->links, now_ms); !s.ok()) return s;
  for (const SharedRunRow& link : sharing->links) {
    absl::StatusOr<std::string> why = LinkReason(db, link, study->spec().name());
    if (!why.ok()) return why.status();
    absl::StatusOr<RunOwnerRow> run = LoadRunOwner(db, link.run_id);
    if (!run.ok()) return run.status();
    if (absl::Status s = InsertEvent(db, now_ms, xmod::v1::EVENT_RUN_LINKED, run->sweep_id,
                                     link.run_id, *why, actor);
        !s.ok()) {
      return s;
    }
    to_cancel->emplace_back(link.run_id, *std::move(why));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<xmod::v1::Study> UserActions::CreateStudy(
    absl::string_view method, const Principal& caller, const xmod::v1::CreateStudyRequest& request,
    int max_bootstrap_samples, int64_t now_ms) {
  if (request.dry_run()) {
    return store_->ReadValue(
        [&](Db& db) { return CountStudy(db, request.spec(), max_bootstrap_samples); });
  }
  xmod::v1::Study study;
  std::vector<std::pair<int64_t, std::string>> to_cancel;  // linked run, why
  absl::Status created = store_->WriteAndWait([&](Db& db) -> absl::Status {
    absl::StatusOr<xmod::v1::Study> stored =
        InsertStudy(db, request.spec(), caller.name, max_bootstrap_samples, now_ms);
    if (!stored.ok()) return stored.status();
    study = *std::move(stored);
    // An error from here on rolls the whole closure back: nothing is stored.
    if (absl::Status s =
            CheckAndRecordMembers(db, method, caller, scheduler_->options().sharing, study, now_ms);
        !s.ok()) {
      return s;
    }
    return LinkSharedRuns(db, ActorOf(caller), now_ms, &study, &to_cancel);
  });
  if (!created.ok()) return created;
  for (const auto& [run_id, why] : to_cancel) {
    // A run a worker took meanwhile is stopped; one that ended meanwhile stays as it is.
    if (absl::Status s = scheduler_->CancelRun(run_id, ActorOf(caller), why); !s.ok()) {
      LOG(WARNING) << "study " << study.id() << ": run " << run_id << " (" << why << "): " << s;
    }
  }
  return study;
}

}  // namespace xmod
