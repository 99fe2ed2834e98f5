// See live_delta_rows.h.
#include "coordinator/store/live_delta_rows.h"

namespace xmod {

absl::Status ReplaceLiveDeltas(Db& db, int64_t sweep_id, const std::vector<LiveDeltaRow>& rows) {
  absl::StatusOr<Stmt> clear =
      db.Prepare("DELETE FROM live_delta WHERE run_id IN (SELECT id FROM runs WHERE sweep_id = ?)");
  if (!clear.ok()) return clear.status();
  if (absl::Status s = clear->Bind(1, sweep_id).Run(); !s.ok()) return s;
  absl::StatusOr<Stmt> insert = db.Prepare(
      "INSERT INTO live_delta (run_id, flops, delta, sparse_loss, dense_loss) "
      "VALUES (?, ?, ?, ?, ?)");
  if (!insert.ok()) return insert.status();
  for (const LiveDeltaRow& row : rows) {
    insert->Reset();
    if (absl::Status s = insert->Bind(1, row.run_id)
                             .Bind(2, row.flops)
                             .Bind(3, row.delta)
                             .Bind(4, row.sparse_loss)
                             .Bind(5, row.dense_loss)
                             .Run();
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LiveDeltaRow>> LoadSweepLiveDeltas(Db& db, int64_t sweep_id) {
  absl::StatusOr<Stmt> select = db.Prepare(
      "SELECT d.run_id, d.flops, d.delta FROM live_delta d JOIN runs r ON r.id = d.run_id "
      "WHERE r.sweep_id = ? ORDER BY d.run_id, d.flops");
  if (!select.ok()) return select.status();
  select->Bind(1, sweep_id);
  std::vector<LiveDeltaRow> rows;
  while (true) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) return rows;
    rows.push_back({select->Int(0), select->Double(1), select->Double(2)});
  }
}

}  // namespace xmod
