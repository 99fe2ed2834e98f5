// Runs the member sweeps of a study share (paper Appendix B.4; docs/paper-fidelity.md, "B.4 as
// a study"): a configuration two member sweeps list — the same model, training (budget and
// seed included) and data — is trained once. At creation the study links each later member's
// run of a configuration an earlier member also lists to that earlier run (store/
// shared_run_rows.h) when it has not started, and the caller cancels it; the study's fit then
// reads the trained run in the later member's place too, so the run carries both members'
// roles (fitter/shared_runs.h merges it into one observation). Functions taking a Db run
// inside a Store::Read or Store::Write closure.
#ifndef XMOD_COORDINATOR_FITTING_STUDY_SHARING_H_
#define XMOD_COORDINATOR_FITTING_STUDY_SHARING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/store/shared_run_rows.h"
#include "fitter/observations.h"
#include "resultsdb/sqlite_db.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {

// A run's configuration: its RunSpec's model, training and data, serialized
// deterministically (checkpoint folder, run id and attempt left out). Equal for the same
// configuration in two sweeps.
std::string RunIdentity(const xmod::v1::RunSpec& spec);

// Links, for the stored `study`, every QUEUED run of a member that no attempt has started and
// whose configuration an earlier member lists in a run not FAILED or CANCELLED, to the
// earliest such run, and returns the new links (the runs the caller is to cancel). Runs linked
// already (by another study) are left as they are.
absl::StatusOr<std::vector<SharedRunRow>> LinkSharedRuns(Db& db, const xmod::v1::Study& study,
                                                         int64_t now_ms);

// Adds, to each member's runs (indexed like `sweep_ids`), the trained run of every link whose
// untrained run belongs to that member, when the trained run is among the members' runs.
void AddTrainedRuns(const std::vector<SharedRunRow>& links, const std::vector<int64_t>& sweep_ids,
                    std::vector<std::vector<fitter::RunCurve>>* runs);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_FITTING_STUDY_SHARING_H_
