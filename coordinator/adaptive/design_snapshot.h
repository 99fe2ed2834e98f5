// Design snapshots: what one decision of a law-guided design reads (a SweepSnapshot, in one
// read transaction: the sweep, its runs and succeeded curves, its previous decision and, under
// a study's fit, the other members' runs), what the fitter sees of it (fitter::DesignState),
// and the decision as it is stored and answered (xmod.v1.DesignDecision). Used by the
// AdaptiveController (adaptive_controller.h); apart from ReadSnapshot, pure functions.
#ifndef XMOD_COORDINATOR_ADAPTIVE_DESIGN_SNAPSHOT_H_
#define XMOD_COORDINATOR_ADAPTIVE_DESIGN_SNAPSHOT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/store/store.h"
#include "fitter/adaptive_design.h"
#include "fitter/live_delta.h"
#include "fitter/observations.h"
#include "fitter/study_fit.h"
#include "xmod/v1/coordinator.pb.h"
#include "xmod/v1/types.pb.h"

namespace xmod {

// What a decision reads, in one read transaction.
struct SweepSnapshot {
  xmod::v1::Sweep sweep;
  std::vector<xmod::v1::Run> runs;
  std::vector<fitter::RunCurve> succeeded;       // curves of the succeeded runs
  std::optional<xmod::v1::DesignDecision> last;  // the previous answer (see ReadSnapshot)
  // Under a study's fit: every member's succeeded runs in its role (the sweep's own
  // included), and the runs of the other members.
  std::vector<fitter::StudyMemberRuns> study_members;
  std::vector<xmod::v1::Run> other_members_runs;
  // The live Δ points of the sweep's runs (run id -> ascending FLOPs), for its partial runs.
  std::map<int64_t, std::vector<fitter::LiveDeltaPoint>> live_deltas;
};

// The sweep's snapshot, under `study`'s fit unless it is empty (INVALID_ARGUMENT "sweep_id:
// ..." when the sweep is not a member); `last` is the latest stored decision of `source`
// ("" = any source). NOT_FOUND for an unknown sweep or study.
absl::StatusOr<SweepSnapshot> ReadSnapshot(Store* store, int64_t sweep_id, const std::string& study,
                                           const std::string& source);

// A run queued or running.
bool InFlight(const xmod::v1::Run& run);

// The design's state: observations of the succeeded runs (sparse runs whose reference has
// not succeeded yet are left out, as the fit trigger does; a study's as it is fitted), dense
// references done, runs in flight, compute spent (budgets of runs done or in flight, FLOPs
// of the ended rest), over the sweep or every member of the study; the forecasts of the
// sweep's own partial runs (partial_runs.h); and the previous answers.
fitter::DesignState StateOf(const SweepSnapshot& snap);

// Counts that change when a decision is due: succeeded, failed, cancelled and all runs.
std::vector<int64_t> Signature(const std::vector<xmod::v1::Run>& runs);

// The fitter's decision as stored: proposals, recommendations, stop, streak, fit.
xmod::v1::DesignDecision DecisionProto(const fitter::Decision& d);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_ADAPTIVE_DESIGN_SNAPSHOT_H_
