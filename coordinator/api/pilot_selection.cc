// See pilot_selection.h.
#include "coordinator/api/pilot_selection.h"

#include <vector>

#include "common/field_path.h"
#include "coordinator/store/pilot_rows.h"
#include "fitter/pilot_selection.h"

namespace xmod {

absl::StatusOr<xmod::v1::SelectPilotResponse> SelectPilot(
    Store& store, const xmod::v1::SelectPilotRequest& request) {
  if (request.sweep_id() <= 0) {
    return InvalidField("sweep_id", "give the pilot sweep's id (> 0)");
  }
  absl::StatusOr<std::vector<fitter::PilotRun>> runs =
      store.ReadValue([&](Db& db) { return ReadPilotRuns(db, request.sweep_id()); });
  if (!runs.ok()) return runs.status();
  return fitter::SelectPilot(request.sweep_id(), *runs);
}

}  // namespace xmod
