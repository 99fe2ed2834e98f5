// The fit trigger's poll. See fit_rows.h.
#include "coordinator/store/fit_rows.h"

namespace xmod {
namespace {

// The rows of `sql`: id, succeeded, last finished, last fit (NULL = none).
absl::StatusOr<std::vector<SucceededRuns>> SelectSucceeded(Db& db, const char* sql) {
  absl::StatusOr<Stmt> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  std::vector<SucceededRuns> out;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    out.push_back({stmt->Int(0), stmt->Int(1), stmt->Int(2), stmt->IsNull(3) ? -1 : stmt->Int(3)});
  }
}

}  // namespace

absl::StatusOr<std::vector<SucceededRuns>> SucceededRunsBySweep(Db& db) {
  return SelectSucceeded(db,
                         "SELECT r.sweep_id, COUNT(*), MAX(r.finished_ms),"
                         " (SELECT MAX(f.created_ms) FROM fits f WHERE f.sweep_id = r.sweep_id)"
                         " FROM runs r WHERE r.state = 'SUCCEEDED' GROUP BY r.sweep_id");
}

absl::StatusOr<std::vector<SucceededRuns>> SucceededRunsByStudy(Db& db) {
  return SelectSucceeded(db,
                         "SELECT m.study_id, COUNT(*), MAX(r.finished_ms),"
                         " (SELECT MAX(f.created_ms) FROM fits f WHERE f.study_id = m.study_id)"
                         " FROM study_members m JOIN runs r ON r.sweep_id = m.sweep_id"
                         " WHERE r.state = 'SUCCEEDED' GROUP BY m.study_id");
}

}  // namespace xmod
