// See ownership.h.
#include "coordinator/api/ownership.h"

#include "absl/strings/str_cat.h"
#include "coordinator/store/sharing_rows.h"

namespace xmod {

absl::Status CheckMayChange(absl::string_view method, const Principal& caller,
                            const OwnedWork& work, const scheduling::SharingPolicy& policy) {
  if (caller.anonymous || caller.scope == Scope::kAdmin) return absl::OkStatus();
  if (caller.scope == Scope::kUser && !work.owner.empty()) {
    if (caller.name == work.owner) return absl::OkStatus();
    if (!policy.SharedGroup(caller.name, work.owner).empty()) return absl::OkStatus();
  }
  const std::string owner = work.owner.empty()
                                ? "was submitted without credentials and belongs to no user"
                                : absl::StrCat("belongs to user \"", work.owner, "\"");
  return absl::PermissionDeniedError(absl::StrCat(
      method, ": ", work.what, " ", owner, "; ", ScopeName(caller.scope), " credential \"",
      caller.name,
      "\" may change only its own work and its groups' (an admin credential may change "
      "anyone's)"));
}

absl::StatusOr<OwnedWork> SweepWork(Db& db, int64_t sweep_id) {
  absl::StatusOr<std::string> submitter = LoadSweepSubmitter(db, sweep_id);
  if (!submitter.ok()) return submitter.status();
  return OwnedWork{absl::StrCat("sweep ", sweep_id), *std::move(submitter)};
}

absl::StatusOr<OwnedWork> RunWork(Db& db, int64_t run_id) {
  absl::StatusOr<RunOwnerRow> run = LoadRunOwner(db, run_id);
  if (!run.ok()) return run.status();
  return OwnedWork{absl::StrCat("run ", run_id, " (sweep ", run->sweep_id, ")"),
                   std::move(run->submitter)};
}

}  // namespace xmod
