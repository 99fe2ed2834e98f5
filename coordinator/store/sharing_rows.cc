// See sharing_rows.h.
#include "coordinator/store/sharing_rows.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/store/event_kinds.h"

namespace xmod {
namespace {

// Calls `row` for each row of `stmt` (parameters bound).
template <typename RowFn>
absl::Status ForEachRow(Stmt& stmt, RowFn&& row) {
  while (true) {
    absl::StatusOr<bool> more = stmt.Step();
    if (!more.ok()) return more.status();
    if (!*more) return absl::OkStatus();
    row(stmt);
  }
}

// The live runs: queued, running, or with an open attempt.
constexpr const char* kLiveRuns =
    "(r.state IN ('QUEUED', 'RUNNING') OR EXISTS (SELECT 1 FROM attempts t"
    " WHERE t.run_id = r.id AND t.ended_ms IS NULL))";

}  // namespace

absl::Status SetPreemptReason(Db& db, int64_t run_id, int attempt, const std::string& reason) {
  absl::StatusOr<Stmt> stmt =
      db.Prepare("UPDATE attempts SET preempt_reason = ? WHERE run_id = ? AND attempt = ?");
  if (!stmt.ok()) return stmt.status();
  return stmt->Bind(1, reason).Bind(2, run_id).Bind(3, attempt).Run();
}

absl::Status SetMemberSlotKind(Db& db, int64_t run_id, int attempt, int member,
                               const std::string& slot_kind, int cores) {
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "UPDATE attempt_members SET slot_kind = ?, cores = ?"
      " WHERE run_id = ? AND attempt = ? AND member = ?");
  if (!stmt.ok()) return stmt.status();
  return stmt->Bind(1, slot_kind)
      .Bind(2, cores)
      .Bind(3, run_id)
      .Bind(4, attempt)
      .Bind(5, member)
      .Run();
}

absl::Status SetMemberGpuPeak(Db& db, int64_t run_id, int attempt, int member, int64_t bytes) {
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "UPDATE attempt_members SET peak_gpu_memory_bytes = ?"
      " WHERE run_id = ? AND attempt = ? AND member = ?");
  if (!stmt.ok()) return stmt.status();
  return stmt->Bind(1, bytes).Bind(2, run_id).Bind(3, attempt).Bind(4, member).Run();
}

absl::StatusOr<std::string> LoadSweepSubmitter(Db& db, int64_t sweep_id) {
  absl::StatusOr<Stmt> stmt = db.Prepare("SELECT submitter FROM sweeps WHERE id = ?");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> found = stmt->Bind(1, sweep_id).Step();
  if (!found.ok()) return found.status();
  if (!*found) return absl::NotFoundError(absl::StrCat("sweep ", sweep_id, " not found"));
  return stmt->Text(0);
}

absl::StatusOr<RunOwnerRow> LoadRunOwner(Db& db, int64_t run_id) {
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "SELECT r.sweep_id, s.submitter FROM runs r JOIN sweeps s ON s.id = r.sweep_id"
      " WHERE r.id = ?");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> found = stmt->Bind(1, run_id).Step();
  if (!found.ok()) return found.status();
  if (!*found) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
  return RunOwnerRow{stmt->Int(0), stmt->Text(1)};
}

absl::StatusOr<RunSharingRow> LoadRunSharing(Db& db, int64_t run_id) {
  absl::StatusOr<Stmt> run = db.Prepare(
      "SELECT s.submitter, r.preemptible FROM runs r JOIN sweeps s ON s.id = r.sweep_id"
      " WHERE r.id = ?");
  if (!run.ok()) return run.status();
  absl::StatusOr<bool> found = run->Bind(1, run_id).Step();
  if (!found.ok()) return found.status();
  if (!*found) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
  RunSharingRow row;
  row.submitter = run->Text(0);
  row.preemptible = run->Int(1) != 0;
  // The ordered attempt is the one open at the event: the highest started by then.
  absl::StatusOr<Stmt> events = db.Prepare(
      "SELECT e.time_ms, (SELECT MAX(a.attempt) FROM attempts a WHERE a.run_id = e.run_id"
      "   AND a.started_ms <= e.time_ms), e.text"
      " FROM events e WHERE e.run_id = ? AND e.kind = ? ORDER BY e.id");
  if (!events.ok()) return events.status();
  events->Bind(1, run_id).Bind(2, EventKindName(xmod::v1::EVENT_RUN_PREEMPT_ORDERED));
  if (absl::Status s =
          ForEachRow(*events,
                     [&](const Stmt& e) {
                       row.preemptions.push_back({e.Int(0), static_cast<int>(e.Int(1)), e.Text(2)});
                     });
      !s.ok()) {
    return s;
  }
  return row;
}

absl::StatusOr<SharingSnapshot> LoadSharingSnapshot(Db& db, int64_t now_ms) {
  SharingSnapshot snapshot;
  absl::StatusOr<Stmt> used = db.Prepare(
      "SELECT s.submitter, SUM(json_array_length(m.slots) * (a.ended_ms - MAX(a.started_ms, ?)))"
      " FROM attempts a JOIN attempt_members m ON m.run_id = a.run_id AND m.attempt = a.attempt"
      " JOIN runs r ON r.id = a.run_id JOIN sweeps s ON s.id = r.sweep_id"
      " WHERE a.ended_ms > ? GROUP BY s.submitter");
  if (!used.ok()) return used.status();
  const int64_t from = now_ms - int64_t{24} * 3600 * 1000;
  used->Bind(1, from).Bind(2, from);
  if (absl::Status s = ForEachRow(
          *used, [&](const Stmt& row) { snapshot.used_slot_ms[row.Text(0)] = row.Double(1); });
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Stmt> runs = db.Prepare(absl::StrCat(
      "SELECT r.id, s.submitter, r.preemptible FROM runs r JOIN sweeps s ON s.id = r.sweep_id"
      " WHERE ",
      kLiveRuns));
  if (!runs.ok()) return runs.status();
  if (absl::Status s = ForEachRow(*runs,
                                  [&](const Stmt& row) {
                                    snapshot.submitter[row.Int(0)] = row.Text(1);
                                    snapshot.preemptible[row.Int(0)] = row.Int(2) != 0;
                                  });
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Stmt> orders = db.Prepare(
      "SELECT run_id, attempt, preempt_reason FROM attempts"
      " WHERE ended_ms IS NULL AND preempt_reason IS NOT NULL");
  if (!orders.ok()) return orders.status();
  if (absl::Status s = ForEachRow(
          *orders,
          [&](const Stmt& row) {
            snapshot.preempt_reason[{row.Int(0), static_cast<int>(row.Int(1))}] = row.Text(2);
          });
      !s.ok()) {
    return s;
  }
  return snapshot;
}

absl::StatusOr<std::map<std::string, UsageRow>> LoadUsage(Db& db, int64_t from_ms, int64_t now_ms) {
  std::map<std::string, UsageRow> usage;
  // Each member's hours within the window: its slots (GPU) or cores (CPU) times the overlap
  // of [started_ms, ended_ms or now] with [from, now].
  absl::StatusOr<Stmt> hours = db.Prepare(
      "SELECT s.submitter,"
      " SUM(CASE WHEN m.slot_kind = 'cuda' THEN json_array_length(m.slots) * span END),"
      " SUM(CASE WHEN m.slot_kind = 'cpu' THEN m.cores * span END),"
      " SUM(CASE WHEN a.ended_ms IS NULL AND m.slot_kind = 'cuda'"
      "     THEN json_array_length(m.slots) END),"
      " SUM(CASE WHEN a.ended_ms IS NULL AND m.slot_kind IS NOT 'cuda'"
      "     THEN json_array_length(m.slots) END)"
      " FROM (SELECT run_id, attempt, ended_ms,"
      "       MAX(0, MIN(COALESCE(ended_ms, ?2), ?2) - MAX(started_ms, ?1)) / 3.6e6 AS span"
      "       FROM attempts WHERE ended_ms IS NULL OR ended_ms > ?1) a"
      " JOIN attempt_members m ON m.run_id = a.run_id AND m.attempt = a.attempt"
      " JOIN runs r ON r.id = a.run_id JOIN sweeps s ON s.id = r.sweep_id"
      " GROUP BY s.submitter");
  if (!hours.ok()) return hours.status();
  hours->Bind(1, from_ms).Bind(2, now_ms);
  if (absl::Status s = ForEachRow(*hours,
                                  [&](const Stmt& row) {
                                    UsageRow& u = usage[row.Text(0)];
                                    u.gpu_hours = row.Double(1);
                                    u.core_hours = row.Double(2);
                                    u.gpu_slots_in_use = static_cast<int>(row.Int(3));
                                    u.cpu_slots_in_use = static_cast<int>(row.Int(4));
                                  });
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Stmt> runs = db.Prepare(
      "SELECT s.submitter, SUM(r.state = 'QUEUED'), SUM(r.state = 'RUNNING')"
      " FROM runs r JOIN sweeps s ON s.id = r.sweep_id"
      " WHERE r.state IN ('QUEUED', 'RUNNING') GROUP BY s.submitter");
  if (!runs.ok()) return runs.status();
  if (absl::Status s = ForEachRow(*runs,
                                  [&](const Stmt& row) {
                                    UsageRow& u = usage[row.Text(0)];
                                    u.queued_runs = static_cast<int>(row.Int(1));
                                    u.running_runs = static_cast<int>(row.Int(2));
                                  });
      !s.ok()) {
    return s;
  }
  return usage;
}

}  // namespace xmod
