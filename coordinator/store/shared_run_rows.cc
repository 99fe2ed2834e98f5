// The shared_runs table. See shared_run_rows.h.
#include "coordinator/store/shared_run_rows.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace xmod {

absl::Status InsertSharedRun(Db& db, const SharedRunRow& row, int64_t now_ms) {
  absl::StatusOr<Stmt> taken = db.Prepare("SELECT 1 FROM shared_runs WHERE run_id = ?");
  if (!taken.ok()) return taken.status();
  taken->Bind(1, row.run_id);
  absl::StatusOr<bool> found = taken->Step();
  if (!found.ok()) return found.status();
  if (*found) return absl::AlreadyExistsError(absl::StrCat("run ", row.run_id, " is shared"));
  absl::StatusOr<Stmt> insert = db.Prepare(
      "INSERT INTO shared_runs (run_id, trained_run_id, study_id, created_ms) VALUES (?, ?, ?, ?)");
  if (!insert.ok()) return insert.status();
  insert->Bind(1, row.run_id).Bind(2, row.trained_run_id).Bind(3, row.study_id).Bind(4, now_ms);
  return insert->Run();
}

absl::StatusOr<std::vector<SharedRunRow>> LoadSharedRuns(Db& db,
                                                         const std::vector<int64_t>& sweep_ids) {
  std::vector<SharedRunRow> out;
  if (sweep_ids.empty()) return out;
  // The ids are integers of our own, joined into the statement's IN list.
  absl::StatusOr<Stmt> stmt = db.Prepare(
      absl::StrCat("SELECT s.run_id, r.sweep_id, s.trained_run_id, s.study_id, t.sweep_id"
                   " FROM shared_runs s JOIN runs r ON r.id = s.run_id"
                   " JOIN runs t ON t.id = s.trained_run_id WHERE r.sweep_id IN (",
                   absl::StrJoin(sweep_ids, ","), ") ORDER BY s.run_id"));
  if (!stmt.ok()) return stmt.status();
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    out.push_back({stmt->Int(0), stmt->Int(1), stmt->Int(2), stmt->Int(3), stmt->Int(4)});
  }
  return out;
}

}  // namespace xmod
