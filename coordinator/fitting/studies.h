// Studies: one scaling-law fit over several sweeps, each member sweep in a role of
// the paper's B.4 design (docs/design.md, "Studies"). Validation of a StudySpec with its
// member sweeps resolved; the rows are store/study_rows.h's (LoadStudy, LoadStudies, ...,
// declared there for every reader of a study). Each function runs inside a Store::Read or
// Store::Write closure.
#ifndef XMOD_COORDINATOR_FITTING_STUDIES_H_
#define XMOD_COORDINATOR_FITTING_STUDIES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/store/study_rows.h"
#include "fitter/observations.h"
#include "resultsdb/sqlite_db.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {

// The member role that keeps the roles the sweep's grid labels name.
inline constexpr absl::string_view kDesignRole = "design";

// The role every run of a member takes: kxl, nact or axk; nullopt for "design" (each run's
// label decides, fitter::SweepRoleOfLabel). Call on a validated role only.
std::optional<fitter::SweepRole> MemberRole(absl::string_view role);

// Validates `spec`, resolves each member's sweep (sweep_id, or the one sweep named
// sweep_name; both are set in the stored spec), fills in an unset seed or bootstrap_samples
// from the member sweeps' FitPlans and inserts the study. INVALID_ARGUMENT naming the field
// path ("name", "members[1].role", "bootstrap_samples", ...), also for an unset setting the
// members' FitPlans disagree on; NOT_FOUND for an unknown sweep; ALREADY_EXISTS for a taken
// name. Nothing is stored on error when run in its own Store::Write closure (each closure
// rolls back alone). `owner` is the creating credential.
absl::StatusOr<xmod::v1::Study> InsertStudy(Db& db, const xmod::v1::StudySpec& spec,
                                            const std::string& owner, int max_bootstrap_samples,
                                            int64_t now_ms);
// InsertStudy's validation and resolution alone: the spec it would store; nothing is written.
absl::StatusOr<xmod::v1::StudySpec> ResolveStudy(Db& db, const xmod::v1::StudySpec& spec,
                                                 int max_bootstrap_samples);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_FITTING_STUDIES_H_
