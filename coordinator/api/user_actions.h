// The changes a caller makes to existing work — cancel a sweep or a run, retry a sweep's
// failed runs, resume a run, put sweeps in a study — each checked against the work's owner
// (ownership.h) before
// anything changes, and stored with the caller as its event's actor. The gRPC methods of
// CoordinatorService and the dashboard's POST routes (http_actions.h) both act through these,
// so a refusal reads the same whichever way it came. The caller's scope was checked before
// (Access::kWrite). Thread-safe.
#ifndef XMOD_COORDINATOR_API_USER_ACTIONS_H_
#define XMOD_COORDINATOR_API_USER_ACTIONS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/credentials.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/store/store.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {

class FitTrigger;

// The actor stored with the events of `caller`'s changes: its credential name ("" for the
// anonymous caller).
std::optional<std::string> ActorOf(const Principal& caller);

class UserActions {
 public:
  // Everything must outlive the actions; `fit_trigger` may be null (no fits to stop).
  UserActions(Store* store, Scheduler* scheduler, FitTrigger* fit_trigger);

  // `method` names the call in a refusal ("CancelRun", "POST /api/runs/7/cancel"). Each is
  // NOT_FOUND for unknown work and PERMISSION_DENIED, changing nothing, for work the caller
  // may not change; otherwise as the Scheduler's method of the same name.
  // The sweep cancelled (its running fit stopped), as it is now.
  absl::StatusOr<xmod::v1::Sweep> CancelSweep(absl::string_view method, const Principal& caller,
                                              int64_t sweep_id);
  // The failed runs of the sweep requeued.
  absl::StatusOr<xmod::v1::RetryFailedResponse> RetryFailed(absl::string_view method,
                                                            const Principal& caller,
                                                            int64_t sweep_id);
  // The run cancelled (a running one is stopped), as it is now.
  absl::StatusOr<xmod::v1::Run> CancelRun(absl::string_view method, const Principal& caller,
                                          int64_t run_id);
  // The failed or cancelled run requeued, as it is now.
  absl::StatusOr<xmod::v1::Run> ResumeRun(absl::string_view method, const Principal& caller,
                                          int64_t run_id);

  // OK when `caller` may change sweep `sweep_id` (ProposeRuns with submit checks this before
  // it fits); NOT_FOUND or PERMISSION_DENIED as above.
  absl::Status CheckSweep(absl::string_view method, const Principal& caller, int64_t sweep_id);

  // Stores the study of `request`, owned by `caller`, with its shared runs linked
  // (coordinator/fitting/study_sharing.h) and an EVENT_STUDY_CREATED event per member and an
  // EVENT_RUN_LINKED one per link, then cancels each linked run ("linked to run N of sweep S");
  // PERMISSION_DENIED, storing nothing, when a member sweep is not the caller's to change.
  // A dry run stores and cancels nothing and checks no owner (a read). Otherwise as
  // coordinator/fitting/studies.h's InsertStudy (errors naming the field).
  absl::StatusOr<xmod::v1::Study> CreateStudy(absl::string_view method, const Principal& caller,
                                              const xmod::v1::CreateStudyRequest& request,
                                              int max_bootstrap_samples, int64_t now_ms);

 private:
  absl::Status CheckRun(absl::string_view method, const Principal& caller, int64_t run_id);
  // The run as it is now.
  absl::StatusOr<xmod::v1::Run> ReadRun(int64_t run_id);

  Store* const store_;
  Scheduler* const scheduler_;
  FitTrigger* const fit_trigger_;
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_USER_ACTIONS_H_
