// Whose work a caller may change (docs/security.md, "What each scope may do"). A sweep, its
// runs and its design decisions belong to the credential that submitted the sweep
// (sweeps.submitter); a study to the one that created it. A change to existing work —
// cancelling a sweep or run, retrying, resuming, proposing runs into a sweep, putting a sweep
// in a study — is allowed to
//   - every caller of a coordinator without credentials (the anonymous caller);
//   - an `admin` credential, on anyone's work;
//   - a `user` credential on its own work, and on the work of the members of a group it
//     belongs to (SharingConfig.groups);
// and refused to everyone else with PERMISSION_DENIED naming the work, its owner and the
// caller, before anything is changed. Work submitted without credentials (owner "") belongs
// to no user once credentials are configured: only an admin may change it. Reads stay open
// to every user and read credential. Pure, thread-safe.
#ifndef XMOD_COORDINATOR_API_OWNERSHIP_H_
#define XMOD_COORDINATOR_API_OWNERSHIP_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/credentials.h"
#include "coordinator/scheduling/sharing_config.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

// What a change touches, as its refusal names it, and the credential that owns it.
struct OwnedWork {
  std::string what;   // "sweep 3", "run 7 (sweep 3)"
  std::string owner;  // a credential name; "" = submitted without credentials
};

// OK when `caller` may change `work` (header comment); else PERMISSION_DENIED
//   "CancelRun: run 7 (sweep 3) belongs to user "alice"; credential "bob" may change only
//    its own work and its groups' (an admin credential may change anyone's)".
absl::Status CheckMayChange(absl::string_view method, const Principal& caller,
                            const OwnedWork& work, const scheduling::SharingPolicy& policy);

// The owner of sweep `sweep_id` / run `run_id` from the database; NOT_FOUND when there is no
// such sweep or run. Run inside a Store::Read or Store::Write closure.
absl::StatusOr<OwnedWork> SweepWork(Db& db, int64_t sweep_id);
absl::StatusOr<OwnedWork> RunWork(Db& db, int64_t run_id);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_OWNERSHIP_H_
