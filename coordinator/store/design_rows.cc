// See design_rows.h.
#include "coordinator/store/design_rows.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer_contract/series.h"

namespace xmod {

absl::StatusOr<std::vector<SweepRunCounts>> LoadSweepRunCounts(Db& db) {
  absl::StatusOr<Stmt> select = db.Prepare(
      "SELECT s.id, s.spec, TOTAL(r.state = 'SUCCEEDED'), TOTAL(r.state = 'FAILED'), "
      "TOTAL(r.state = 'CANCELLED'), COUNT(r.id) "
      "FROM sweeps s LEFT JOIN runs r ON r.sweep_id = s.id WHERE s.cancelled = 0 "
      "GROUP BY s.id");
  if (!select.ok()) return select.status();
  std::vector<SweepRunCounts> sweeps;
  while (true) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) return sweeps;
    sweeps.push_back(
        {select->Int(0),
         select->Text(1),
         {static_cast<int64_t>(select->Double(2)), static_cast<int64_t>(select->Double(3)),
          static_cast<int64_t>(select->Double(4)), select->Int(5)}});
  }
}

std::string ValLossCountsSql(const std::vector<int64_t>& also) {
  // INDEXED BY: without statistics the planner reads every metric row of each run through the
  // primary key (run_id, attempt, seq) to find the few val/loss ones, on every poll.
  return absl::StrCat(
      "SELECT r.sweep_id, COUNT(m.value), TOTAL(m.flops), "
      "  MAX(r.state IN ('QUEUED', 'RUNNING')) "
      "FROM runs r LEFT JOIN metrics m INDEXED BY metrics_by_name ON m.run_id = r.id"
      " AND m.name = ",
      SqlString(SeriesName(xmod::v1::SERIES_VAL_LOSS)),
      " "
      "WHERE r.sweep_id IN (SELECT sweep_id FROM runs WHERE state IN ('QUEUED', 'RUNNING')",
      also.empty()
          ? ""
          : absl::StrCat(" UNION SELECT value FROM json_each('[", absl::StrJoin(also, ","), "]')"),
      ") GROUP BY r.sweep_id");
}

absl::StatusOr<std::map<int64_t, ValLossCounts>> LoadValLossCounts(
    Db& db, const std::vector<int64_t>& also) {
  absl::StatusOr<Stmt> counts = db.Prepare(ValLossCountsSql(also));
  if (!counts.ok()) return counts.status();
  std::map<int64_t, ValLossCounts> out;
  while (true) {
    absl::StatusOr<bool> row = counts->Step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    out[counts->Int(0)] = {counts->Int(1), counts->Double(2), counts->Int(3) != 0};
  }
}

}  // namespace xmod
