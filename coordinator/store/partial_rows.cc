// See partial_rows.h.
#include "coordinator/store/partial_rows.h"

namespace xmod {

absl::StatusOr<std::map<int64_t, std::vector<fitter::LiveDeltaPoint>>> LoadSweepLiveDeltas(
    Db& db, int64_t sweep_id) {
  absl::StatusOr<Stmt> select = db.Prepare(
      "SELECT d.run_id, d.flops, d.delta FROM live_delta d JOIN runs r ON r.id = d.run_id "
      "WHERE r.sweep_id = ? ORDER BY d.run_id, d.flops");
  if (!select.ok()) return select.status();
  select->Bind(1, sweep_id);
  std::map<int64_t, std::vector<fitter::LiveDeltaPoint>> out;
  while (true) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    fitter::LiveDeltaPoint p;
    p.flops = select->Double(1);
    p.delta = select->Double(2);
    out[select->Int(0)].push_back(p);
  }
}

}  // namespace xmod
