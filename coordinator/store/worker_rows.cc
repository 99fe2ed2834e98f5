// Workers and attempt holders. See worker_rows.h.
#include "coordinator/store/worker_rows.h"

#include <utility>

namespace xmod {
namespace {

// The text in column 0 of the first row of `stmt` (bound already); "" when no row.
absl::StatusOr<std::string> FirstText(absl::StatusOr<Stmt> stmt) {
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return *row ? stmt->Text(0) : std::string();
}

}  // namespace

absl::StatusOr<std::string> WorkerName(Db& db, int64_t worker_id) {
  absl::StatusOr<Stmt> stmt = db.Prepare("SELECT name FROM workers WHERE id = ?");
  if (stmt.ok()) stmt->Bind(1, worker_id);
  return FirstText(std::move(stmt));
}

absl::StatusOr<std::vector<std::string>> AttemptHolders(Db& db, int64_t run_id, int attempt) {
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "SELECT worker FROM attempt_members WHERE run_id = ? AND attempt = ? ORDER BY member");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, run_id).Bind(2, attempt);
  std::vector<std::string> names;
  for (;;) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return names;
    names.push_back(stmt->Text(0));
  }
}

}  // namespace xmod
