// ForEachRow: the store's loop over a prepared statement's rows.
#ifndef XMOD_COORDINATOR_STORE_ROW_LOOP_H_
#define XMOD_COORDINATOR_STORE_ROW_LOOP_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

// Steps `stmt` through its rows, calling `row` on each; the first step's error, if any.
template <typename RowFn>
absl::Status ForEachRow(Stmt& stmt, RowFn row) {
  while (true) {
    absl::StatusOr<bool> more = stmt.Step();
    if (!more.ok()) return more.status();
    if (!*more) return absl::OkStatus();
    row(stmt);
  }
}

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_ROW_LOOP_H_
