// Runs the member sweeps of a study share (paper Appendix B.4; docs/paper-fidelity.md, "B.4 as
// a study"): a configuration two member sweeps list — the same model, training (budget and
// seed included) and data — is trained once. At creation the study links the two runs of such
// a configuration (store/shared_run_rows.h) while at least one can still give way: the one
// further along is kept — a succeeded run, else the one with more training FLOPs done, the
// earlier member's on a tie — and the other is linked to it and cancelled by the caller
// (stopped if it was running; "linked to run N of sweep S"). Two succeeded twins stay as they
// are. The study's fit then reads the kept run in both members' places, so it carries both
// members' roles (fitter/shared_runs.h merges it into one observation). Functions taking a Db run
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

// What sharing does to a study's members.
struct StudySharing {
  // For every configuration two members list in runs not FAILED or CANCELLED (and not linked
  // already, by another study), the run that gives way linked to the one kept (header
  // comment; study_id as given).
  std::vector<SharedRunRow> links;
  int listed_observations = 0;    // members' in-range X-MoD runs not FAILED or CANCELLED
  int in_range_observations = 0;  // ... each configuration once, replicates of other seeds
                                  // too: what the study's fit counts
};

// The sharing of the members of `spec` (resolved: sweep ids set) for a study `study_id`
// (0 for a dry run). Reads only.
absl::StatusOr<StudySharing> PlanSharedRuns(Db& db, const xmod::v1::StudySpec& spec,
                                            int64_t study_id);

// Stores the study's links (InsertSharedRun); the caller then cancels each link's run_id.
absl::Status StoreSharedRuns(Db& db, const std::vector<SharedRunRow>& links, int64_t now_ms);

// Adds, to each member's runs (indexed like `sweep_ids`), the trained run of every link whose
// untrained run belongs to that member, when the trained run is among the members' runs.
void AddTrainedRuns(const std::vector<SharedRunRow>& links, const std::vector<int64_t>& sweep_ids,
                    std::vector<std::vector<fitter::RunCurve>>* runs);

// The succeeded runs that other sweeps train in place of `sweep_id`'s linked runs, so that
// the sweep's own fit still sees every configuration it lists.
absl::StatusOr<std::vector<fitter::RunCurve>> LoadRunsTrainedElsewhere(Db& db, int64_t sweep_id);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_FITTING_STUDY_SHARING_H_
