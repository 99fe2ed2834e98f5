// Succeeded runs of a sweep with their loss curves. See run_curves.h.
#include "resultsdb/run_curves.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "resultsdb/schema.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {
namespace {

absl::Status CheckVersion(Db& db) {
  absl::StatusOr<int> version = SchemaVersion(db);
  if (!version.ok()) return version.status();
  if (*version == 0) {
    return absl::FailedPreconditionError("not an xmod results database (schema version 0)");
  }
  if (*version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database schema version ", *version, " is newer than this binary's ", kSchemaVersion));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> SweepExists(Db& db, int64_t sweep_id) {
  absl::StatusOr<Stmt> stmt = db.Prepare("SELECT 1 FROM sweeps WHERE id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, sweep_id);
  return stmt->Step();
}

StoredRunCurve RunFromRow(const Stmt& s) {
  StoredRunCurve run;
  run.run_id = s.Int(0);
  run.name = s.Text(1);
  xmod::v1::Architecture arch;
  if (xmod::v1::Architecture_Parse(s.Text(2), &arch)) run.arch = arch;
  run.k = static_cast<int>(s.Int(3));
  run.a = s.OptionalDouble(4);
  run.seq_len = static_cast<int>(s.Int(5));
  run.backbone = s.Text(6);
  run.held_out = s.Int(7) != 0;
  xmod::v1::RunSpec spec;
  if (spec.ParseFromString(s.Text(8))) {
    if (spec.model().has_n0()) run.n0 = spec.model().n0();
    run.seed = spec.training().seed();
  }
  run.label = s.Text(9);
  xmod::v1::RunState state;
  if (xmod::v1::RunState_Parse(s.Text(10), &state)) run.state = state;
  run.flop_budget = s.Double(11);
  return run;
}

}  // namespace

absl::StatusOr<std::vector<StoredRunCurve>> LoadRunCurves(
    Db& db, int64_t sweep_id, const std::vector<xmod::v1::RunState>& states) {
  if (absl::Status s = CheckVersion(db); !s.ok()) return s;
  absl::StatusOr<bool> exists = SweepExists(db, sweep_id);
  if (!exists.ok()) return exists.status();
  if (!*exists) return absl::NotFoundError(absl::StrCat("sweep ", sweep_id, " does not exist"));

  std::string sql =
      "SELECT id, name, arch, k, a, seq_len, backbone, held_out, spec, label, state,"
      " flop_budget FROM runs WHERE sweep_id = ?";
  if (!states.empty()) {
    absl::StrAppend(&sql, " AND state IN (",
                    absl::StrJoin(states, ",",
                                  [](std::string* out, xmod::v1::RunState state) {
                                    absl::StrAppend(out, "'", xmod::v1::RunState_Name(state), "'");
                                  }),
                    ")");
  }
  absl::StatusOr<Stmt> runs_stmt = db.Prepare(absl::StrCat(sql, " ORDER BY id"));
  if (!runs_stmt.ok()) return runs_stmt.status();
  runs_stmt->Bind(1, sweep_id);
  std::vector<StoredRunCurve> runs;
  std::map<int64_t, size_t> index;  // run id -> position in `runs`
  while (true) {
    absl::StatusOr<bool> row = runs_stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    index[runs_stmt->Int(0)] = runs.size();
    runs.push_back(RunFromRow(*runs_stmt));
  }
  if (runs.empty()) return runs;

  absl::StatusOr<Stmt> loss_stmt = db.Prepare(
      "SELECT run_id, flops, val_loss FROM flop_aligned_loss WHERE sweep_id = ?"
      " ORDER BY run_id, flops");
  if (!loss_stmt.ok()) return loss_stmt.status();
  loss_stmt->Bind(1, sweep_id);
  while (true) {
    absl::StatusOr<bool> row = loss_stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    auto it = index.find(loss_stmt->Int(0));
    if (it == index.end()) continue;  // a run in another state
    // Values that are not numbers read as NaN, so that the fit reports them, not hides them.
    runs[it->second].points.push_back({loss_stmt->RealOrNaN(1), loss_stmt->RealOrNaN(2)});
  }
  return runs;
}

absl::StatusOr<std::vector<StoredRunCurve>> LoadSucceededRunCurves(Db& db, int64_t sweep_id) {
  return LoadRunCurves(db, sweep_id, {xmod::v1::SUCCEEDED});
}

absl::StatusOr<std::vector<StoredRunCurve>> LoadSucceededRunCurves(const std::string& db_path,
                                                                   int64_t sweep_id) {
  absl::StatusOr<std::unique_ptr<Db>> db = Db::OpenReadOnly(db_path, /*busy_timeout_ms=*/5000);
  if (!db.ok()) return absl::NotFoundError(db.status().message());
  // One read transaction: the runs and their points come from the same commit.
  if (absl::Status s = (*db)->Exec("BEGIN"); !s.ok()) return s;
  absl::StatusOr<std::vector<StoredRunCurve>> runs = LoadSucceededRunCurves(**db, sweep_id);
  (*db)->Exec("COMMIT").IgnoreError();  // a read transaction has nothing to lose
  return runs;
}

}  // namespace xmod
