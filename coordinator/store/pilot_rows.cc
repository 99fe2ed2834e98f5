// A pilot sweep's runs for the B.3 selection. See pilot_rows.h.
#include "coordinator/store/pilot_rows.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

PilotRunRow PilotRunFromRow(const Stmt& s) {
  PilotRunRow run;
  run.run_id = s.Int(0);
  xmod::v1::RunState state;
  if (xmod::v1::RunState_Parse(s.Text(1), &state)) run.state = state;
  xmod::v1::Architecture arch;
  if (xmod::v1::Architecture_Parse(s.Text(2), &arch)) run.arch = arch;
  run.backbone = s.Text(3);
  run.seq_len = static_cast<int>(s.Int(4));
  run.flop_budget = s.Double(5);
  run.k = static_cast<int>(s.Int(6));
  run.a = s.OptionalDouble(7);
  run.moe = s.IsNull(8) ? "" : s.Text(8);
  run.total_params = s.Double(9);
  if (!s.IsNull(10)) run.final_val_loss = s.RealOrNaN(10);
  xmod::v1::RunSpec spec;
  if (spec.ParseFromString(s.Text(11))) run.spec = std::move(spec);
  return run;
}

}  // namespace

absl::StatusOr<std::vector<PilotRunRow>> ReadPilotRuns(Db& db, int64_t sweep_id) {
  absl::StatusOr<Stmt> sweep = db.Prepare("SELECT 1 FROM sweeps WHERE id = ?");
  if (!sweep.ok()) return sweep.status();
  sweep->Bind(1, sweep_id);
  absl::StatusOr<bool> exists = sweep->Step();
  if (!exists.ok()) return exists.status();
  if (!*exists) return absl::NotFoundError(absl::StrCat("sweep ", sweep_id, " not found"));

  absl::StatusOr<Stmt> stmt = db.Prepare(
      "SELECT r.id, r.state, r.arch, r.backbone, r.seq_len, r.flop_budget, r.k, r.a, r.moe,"
      " r.total_params, s.final_val_loss, r.spec"
      " FROM runs r JOIN run_summary s ON s.run_id = r.id"
      " WHERE r.sweep_id = ? ORDER BY r.id");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, sweep_id);
  std::vector<PilotRunRow> runs;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return runs;
    runs.push_back(PilotRunFromRow(*stmt));
  }
}

}  // namespace xmod
