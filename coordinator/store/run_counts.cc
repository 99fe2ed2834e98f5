// Runs per state. See run_counts.h.
#include "coordinator/store/run_counts.h"

namespace xmod {

absl::StatusOr<std::map<std::string, int>> CountRunsByState(Db& db) {
  absl::StatusOr<Stmt> stmt = db.Prepare("SELECT state, COUNT(*) FROM runs GROUP BY state");
  if (!stmt.ok()) return stmt.status();
  std::map<std::string, int> counts;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return counts;
    counts[stmt->Text(0)] = static_cast<int>(stmt->Int(1));
  }
}

}  // namespace xmod
