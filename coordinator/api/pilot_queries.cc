// See pilot_queries.h.
#include "coordinator/api/pilot_queries.h"

#include <utility>
#include <vector>

#include "common/field_path.h"
#include "coordinator/store/pilot_rows.h"
#include "fitter/pilot_selection.h"

namespace xmod {
namespace {

fitter::PilotRun PilotRunOf(PilotRunRow row) {
  fitter::PilotRun run;
  run.run_id = row.run_id;
  run.state = row.state;
  run.arch = row.arch;
  run.backbone = std::move(row.backbone);
  run.seq_len = row.seq_len;
  run.flop_budget = row.flop_budget;
  run.k = row.k;
  run.a = row.a;
  run.moe = std::move(row.moe);
  run.total_params = row.total_params;
  run.final_val_loss = row.final_val_loss;
  if (row.spec.has_value()) run.replicate_key = fitter::ReplicateKey(*std::move(row.spec));
  return run;
}

}  // namespace

absl::StatusOr<xmod::v1::SelectPilotResponse> SelectPilot(
    Store& store, const xmod::v1::SelectPilotRequest& request) {
  if (request.sweep_id() <= 0) {
    return InvalidField("sweep_id", "give the pilot sweep's id (> 0)");
  }
  absl::StatusOr<std::vector<PilotRunRow>> rows =
      store.ReadValue([&](Db& db) { return ReadPilotRuns(db, request.sweep_id()); });
  if (!rows.ok()) return rows.status();
  std::vector<fitter::PilotRun> runs;
  for (PilotRunRow& row : *rows) runs.push_back(PilotRunOf(std::move(row)));
  return fitter::SelectPilot(request.sweep_id(), runs);
}

}  // namespace xmod
