// Sweep run curves from the coordinator's database. See db_source.h.
#include "fitter/db_source.h"

#include <sqlite3.h>

#include <limits>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "xmod/v1/spec.pb.h"

namespace xmod::fitter {
namespace {

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StmtCloser {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtCloser>;

absl::StatusOr<StmtPtr> Prepare(sqlite3* db, const char* sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &raw, nullptr) != SQLITE_OK) {
    return absl::FailedPreconditionError(
        absl::StrCat("database: cannot prepare query (", sqlite3_errmsg(db), ")"));
  }
  return StmtPtr(raw);
}

std::string Text(sqlite3_stmt* s, int col) {
  const unsigned char* t = sqlite3_column_text(s, col);
  return t == nullptr ? "" : reinterpret_cast<const char*>(t);
}

}  // namespace

absl::StatusOr<std::vector<RunCurve>> LoadSweepRuns(const std::string& db_path, int64_t sweep_id) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(db_path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  DbPtr db(raw);
  if (rc != SQLITE_OK) {
    return absl::NotFoundError(absl::StrCat("database ", db_path, ": cannot open (",
                                            raw ? sqlite3_errmsg(raw) : "out of memory", ")"));
  }
  sqlite3_busy_timeout(db.get(), 5000);

  // Runs of the sweep, with their spec for N0 and their grid label for the sweep role.
  absl::StatusOr<StmtPtr> runs_stmt =
      Prepare(db.get(),
              "SELECT id, name, arch, k, a, seq_len, backbone, held_out, spec, label FROM runs "
              "WHERE sweep_id = ? AND state = 'SUCCEEDED' ORDER BY id");
  if (!runs_stmt.ok()) return runs_stmt.status();
  sqlite3_bind_int64(runs_stmt->get(), 1, sweep_id);
  std::vector<RunCurve> runs;
  std::map<int64_t, size_t> index;
  int step_rc;
  while ((step_rc = sqlite3_step(runs_stmt->get())) == SQLITE_ROW) {
    sqlite3_stmt* s = runs_stmt->get();
    RunCurve run;
    run.run_id = sqlite3_column_int64(s, 0);
    run.name = Text(s, 1);
    xmod::v1::Architecture arch;
    run.arch =
        xmod::v1::Architecture_Parse(Text(s, 2), &arch) ? arch : xmod::v1::ARCHITECTURE_UNSPECIFIED;
    run.k = sqlite3_column_int(s, 3);
    run.a = sqlite3_column_double(s, 4);
    run.seq_len = sqlite3_column_int(s, 5);
    run.backbone = Text(s, 6);
    run.held_out = sqlite3_column_int(s, 7) != 0;
    xmod::v1::RunSpec spec;
    const void* blob = sqlite3_column_blob(s, 8);
    if (blob != nullptr && spec.ParseFromArray(blob, sqlite3_column_bytes(s, 8)) &&
        spec.model().has_n0()) {
      run.n0 = spec.model().n0();
    }
    run.label = Text(s, 9);
    index[run.run_id] = runs.size();
    runs.push_back(std::move(run));
  }
  if (step_rc != SQLITE_DONE) {
    return absl::InternalError(absl::StrCat("database: reading runs: ", sqlite3_errmsg(db.get())));
  }
  if (runs.empty()) {
    absl::StatusOr<StmtPtr> sweep = Prepare(db.get(), "SELECT COUNT(*) FROM sweeps WHERE id = ?");
    if (!sweep.ok()) return sweep.status();
    sqlite3_bind_int64(sweep->get(), 1, sweep_id);
    if (sqlite3_step(sweep->get()) == SQLITE_ROW && sqlite3_column_int(sweep->get(), 0) == 0) {
      return absl::NotFoundError(absl::StrCat("sweep ", sweep_id, " does not exist"));
    }
    return runs;
  }

  absl::StatusOr<StmtPtr> loss_stmt =
      Prepare(db.get(),
              "SELECT run_id, flops, val_loss FROM flop_aligned_loss WHERE sweep_id = ? "
              "ORDER BY run_id, flops");
  if (!loss_stmt.ok()) return loss_stmt.status();
  sqlite3_bind_int64(loss_stmt->get(), 1, sweep_id);
  while ((step_rc = sqlite3_step(loss_stmt->get())) == SQLITE_ROW) {
    sqlite3_stmt* s = loss_stmt->get();
    auto it = index.find(sqlite3_column_int64(s, 0));
    if (it == index.end()) continue;
    // NULL or non-numeric values read as NaN so that they are reported, not hidden.
    // The coordinator stores NaN as the text 'NaN' (SQLite would turn a bound NaN into NULL).
    const int type = sqlite3_column_type(s, 2);
    const bool numeric = type == SQLITE_FLOAT || type == SQLITE_INTEGER;
    const double loss =
        numeric ? sqlite3_column_double(s, 2) : std::numeric_limits<double>::quiet_NaN();
    runs[it->second].points.push_back({sqlite3_column_double(s, 1), loss});
  }
  if (step_rc != SQLITE_DONE) {
    return absl::InternalError(
        absl::StrCat("database: reading flop_aligned_loss: ", sqlite3_errmsg(db.get())));
  }
  return runs;
}

}  // namespace xmod::fitter
