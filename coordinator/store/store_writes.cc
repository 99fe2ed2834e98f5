// See store_writes.h.
#include "coordinator/store/store_writes.h"

#include <cmath>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/proto_json.h"

namespace xmod {

using xmod::v1::Architecture_Name;
using xmod::v1::RunState_Name;

namespace {

// NULL for 0: the value of a field whose 0 means "none" (a time not reached, the id of no
// sweep or run, A of an architecture without anchors).
std::optional<int64_t> NullIfZero(int64_t value) {
  return value == 0 ? std::nullopt : std::optional<int64_t>(value);
}
std::optional<double> NullIfZero(double value) {
  return value == 0 ? std::nullopt : std::optional<double>(value);
}

}  // namespace

absl::StatusOr<int64_t> InsertSweep(Db& db, const xmod::v1::SweepSpec& spec,
                                    const std::string& submitter, int64_t now_ms) {
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      "INSERT INTO sweeps (name, description, spec, priority, created_ms, submitter)"
      " VALUES (?,?,?,?,?,?)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, spec.name())
      .Bind(2, spec.description())
      .BindBlob(3, spec.SerializeAsString())
      .Bind(4, spec.priority())
      .Bind(5, now_ms)
      .Bind(6, submitter);
  if (absl::Status s = stmt->Run(); !s.ok()) return s;
  return db.LastInsertRowId();
}

absl::StatusOr<int64_t> InsertRun(Db& db, int64_t sweep_id, const xmod::v1::Run& run,
                                  int64_t now_ms) {
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      "INSERT INTO runs (sweep_id, label, name, arch, k, a, seq_len, backbone, moe, flop_budget,"
      " forward_flops_per_token, total_params, held_out, priority, state, max_attempts, spec,"
      " created_ms, preemptible) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  if (!stmt.ok()) return stmt.status();
  const xmod::v1::ModelSpec& model = run.spec().model();
  std::string moe;
  if (model.arch() == xmod::v1::MOE) {
    moe = absl::StrCat(model.moe().active_experts(), ":", model.moe().total_experts(), "+",
                       model.moe().shared_experts());
  }
  stmt->Bind(1, sweep_id)
      .Bind(2, run.label())
      .Bind(3, run.name())
      .Bind(4, Architecture_Name(model.arch()))
      .Bind(5, model.k())
      .BindOptional(6, NullIfZero(model.a()))
      .Bind(7, run.spec().training().seq_len())
      .Bind(8, model.backbone().name())
      .BindTextOrNull(9, moe)
      .Bind(10, run.spec().training().flop_budget())
      .Bind(11, run.forward_flops_per_token())
      .Bind(12, run.total_params())
      .Bind(13, run.held_out() ? 1 : 0)
      .Bind(14, run.priority())
      .Bind(15, RunState_Name(xmod::v1::QUEUED))
      .Bind(16, run.max_attempts())
      .BindBlob(17, run.spec().SerializeAsString())
      .Bind(18, now_ms)
      .Bind(19, run.preemptible() ? 1 : 0);
  if (absl::Status s = stmt->Run(); !s.ok()) return s;
  return db.LastInsertRowId();
}

namespace {

// A column an UPDATE sets, with how to bind its value.
struct ColumnSet {
  const char* column;
  std::function<void(Stmt&, int)> bind;
};

// The columns `u` sets, in a fixed order.
std::vector<ColumnSet> ColumnsOf(const RunUpdate& u) {
  std::vector<ColumnSet> sets;
  const auto value = [&sets](const char* column, auto v) {
    sets.push_back({column, [v](Stmt& s, int i) { s.Bind(i, v); }});
  };
  const auto nullable_time = [&sets](const char* column, int64_t ms) {
    sets.push_back({column, [ms](Stmt& s, int i) { s.BindOptional(i, NullIfZero(ms)); }});
  };
  if (u.state) value("state", RunState_Name(*u.state));
  if (u.attempts) value("attempts", *u.attempts);
  if (u.failures) value("failures", *u.failures);
  if (u.max_attempts) value("max_attempts", *u.max_attempts);
  if (u.not_before_ms) value("not_before_ms", *u.not_before_ms);
  if (u.error) value("error", *u.error);
  if (u.started_ms) nullable_time("started_ms", *u.started_ms);
  if (u.finished_ms) nullable_time("finished_ms", *u.finished_ms);
  if (u.oom_failures) value("oom_failures", *u.oom_failures);
  return sets;
}

}  // namespace

absl::Status UpdateRun(Db& db, const RunUpdate& u) {
  const std::vector<ColumnSet> sets = ColumnsOf(u);
  if (sets.empty()) return absl::OkStatus();
  std::vector<std::string> assignments;
  for (const ColumnSet& set : sets) assignments.push_back(absl::StrCat(set.column, " = ?"));
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      absl::StrCat("UPDATE runs SET ", absl::StrJoin(assignments, ", "), " WHERE id = ?"));
  if (!stmt.ok()) return stmt.status();
  int i = 1;
  for (const ColumnSet& set : sets) set.bind(*stmt, i++);
  stmt->Bind(i, u.run_id);
  return stmt->Run();
}

absl::Status MarkRunStarted(Db& db, int64_t run_id, int64_t now_ms) {
  absl::StatusOr<Stmt> stmt =
      db.PrepareCached("UPDATE runs SET started_ms = ? WHERE id = ? AND started_ms IS NULL");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, now_ms).Bind(2, run_id);
  return stmt->Run();
}

absl::Status UpdateProgress(Db& db, int64_t run_id, const xmod::v1::Progress& p) {
  // The position only moves forward: heartbeat snapshots and metric batches can arrive out
  // of order, and a resumed attempt re-covers ground the run already reached.
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      "UPDATE runs SET step = CASE WHEN ?3 >= flops_done THEN ?1 ELSE step END,"
      " tokens = CASE WHEN ?3 >= flops_done THEN ?2 ELSE tokens END,"
      " flops_done = MAX(flops_done, ?3),"
      " train_loss = CASE WHEN ?4 > 0 THEN ?4 ELSE train_loss END,"
      " val_loss = CASE WHEN ?5 > 0 THEN ?5 ELSE val_loss END,"
      " tokens_per_second = CASE WHEN ?6 > 0 THEN ?6 ELSE tokens_per_second END"
      " WHERE id = ?7");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, p.step())
      .Bind(2, p.tokens())
      .Bind(3, p.flops())
      .Bind(4, p.train_loss())
      .Bind(5, p.val_loss())
      .Bind(6, p.tokens_per_second())
      .Bind(7, run_id);
  return stmt->Run();
}

absl::Status InsertAttempt(Db& db, const AttemptStart& a) {
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      "INSERT INTO attempts (run_id, attempt, worker_id, worker, slots, started_ms,"
      " resumed_from_step, lease_expires_ms, rendezvous, memory_plan)"
      " VALUES (?,?,?,?,?,?,?,?,?,?)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, a.run_id)
      .Bind(2, a.attempt)
      .Bind(3, a.worker_id)
      .Bind(4, a.worker)
      .Bind(5, a.slots)
      .Bind(6, a.started_ms)
      .Bind(7, a.resumed_from_step)
      .Bind(8, a.lease_expires_ms)
      .BindTextOrNull(9, a.rendezvous)
      .BindTextOrNull(10, a.memory_plan);
  return stmt->Run();
}

absl::Status EndAttempt(Db& db, int64_t run_id, int attempt, const std::string& outcome,
                        int exit_code, const std::string& error, int64_t now_ms) {
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      "UPDATE attempts SET ended_ms = ?1, outcome = ?2, exit_code = ?3,"
      " error = CASE WHEN error = '' THEN ?4 WHEN ?4 = '' THEN error ELSE ?4 || '; ' || error END"
      " WHERE run_id = ?5 AND attempt = ?6 AND ended_ms IS NULL");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, now_ms)
      .Bind(2, outcome)
      .BindOptional(3, outcome == "lost" ? std::nullopt : std::optional<int64_t>(exit_code))
      .Bind(4, error)
      .Bind(5, run_id)
      .Bind(6, attempt);
  return stmt->Run();
}

absl::Status RenewLease(Db& db, int64_t run_id, int attempt, int64_t lease_expires_ms) {
  absl::StatusOr<Stmt> stmt =
      db.PrepareCached("UPDATE attempts SET lease_expires_ms = ? WHERE run_id = ? AND attempt = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, lease_expires_ms).Bind(2, run_id).Bind(3, attempt);
  return stmt->Run();
}

namespace {

// InsertMetrics over any sequence of points (a vector, or a request's repeated field).
template <typename Points>
absl::Status InsertMetricSequence(Db& db, int64_t run_id, int attempt, int64_t first_seq,
                                  const Points& points) {
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      "INSERT OR IGNORE INTO metrics (run_id, attempt, seq, step, tokens, flops, name, value)"
      " VALUES (?,?,?,?,?,?,?,?)");
  if (!stmt.ok()) return stmt.status();
  int64_t seq = first_seq;
  for (const xmod::v1::MetricPoint& p : points) {
    stmt->Reset();
    stmt->Bind(1, run_id)
        .Bind(2, attempt)
        .Bind(3, seq++)
        .Bind(4, p.step())
        .Bind(5, p.tokens())
        .Bind(7, p.name());
    // sqlite stores a bound NaN as NULL, which the NOT NULL columns with INSERT OR IGNORE
    // would drop silently after it was acknowledged; NaN is kept as the text 'NaN' instead
    // (a REAL column keeps text that does not look like a number), so readers see it.
    if (std::isnan(p.flops())) {
      stmt->Bind(6, "NaN");
    } else {
      stmt->Bind(6, p.flops());
    }
    if (std::isnan(p.value())) {
      stmt->Bind(8, "NaN");
    } else {
      stmt->Bind(8, p.value());
    }
    if (absl::Status s = stmt->Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status InsertMetrics(Db& db, int64_t run_id, int attempt, int64_t first_seq,
                           const std::vector<xmod::v1::MetricPoint>& points) {
  return InsertMetricSequence(db, run_id, attempt, first_seq, points);
}

absl::Status InsertMetrics(
    Db& db, int64_t run_id, int attempt, int64_t first_seq,
    const google::protobuf::RepeatedPtrField<xmod::v1::MetricPoint>& points) {
  return InsertMetricSequence(db, run_id, attempt, first_seq, points);
}

absl::Status InsertCheckpoint(Db& db, int64_t run_id, int attempt, const xmod::v1::Checkpoint& c,
                              int64_t now_ms) {
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      "INSERT OR REPLACE INTO checkpoints (run_id, attempt, step, tokens, flops, path, sha256,"
      " bytes, created_ms) VALUES (?,?,?,?,?,?,?,?,?)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, run_id)
      .Bind(2, attempt)
      .Bind(3, c.step())
      .Bind(4, c.tokens())
      .Bind(5, c.flops())
      .Bind(6, c.path())
      .Bind(7, c.sha256())
      .Bind(8, c.bytes())
      .Bind(9, now_ms);
  return stmt->Run();
}

absl::Status KeepNewestCheckpoints(Db& db, int64_t run_id, int keep) {
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      "DELETE FROM checkpoints WHERE run_id = ?1 AND step < (SELECT min(step) FROM"
      " (SELECT step FROM checkpoints WHERE run_id = ?1 ORDER BY step DESC LIMIT ?2))");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, run_id).Bind(2, keep);
  return stmt->Run();
}

absl::Status DeleteCheckpoint(Db& db, int64_t run_id, const std::string& path) {
  absl::StatusOr<Stmt> stmt =
      db.PrepareCached("DELETE FROM checkpoints WHERE run_id = ? AND path = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, run_id).Bind(2, path);
  return stmt->Run();
}

absl::Status NoteResumeFallback(Db& db, int64_t run_id, int attempt, int64_t resumed_from_step,
                                const std::string& note) {
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      "UPDATE attempts SET resumed_from_step = ?1,"
      " error = CASE WHEN error = '' THEN ?2 ELSE error || '; ' || ?2 END"
      " WHERE run_id = ?3 AND attempt = ?4");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, resumed_from_step).Bind(2, note).Bind(3, run_id).Bind(4, attempt);
  return stmt->Run();
}

absl::StatusOr<int64_t> UpsertWorker(Db& db, const xmod::v1::RegisterRequest& request,
                                     int64_t now_ms) {
  // The slots and what gangs need of the worker (advertised host, rendezvous ports).
  xmod::v1::RegisterRequest stored;
  *stored.mutable_slots() = request.slots();
  stored.set_advertise_host(request.advertise_host());
  stored.set_rendezvous_port_first(request.rendezvous_port_first());
  stored.set_rendezvous_port_last(request.rendezvous_port_last());
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      "INSERT INTO workers (name, hostname, version, slots, registered_ms, last_seen_ms)"
      " VALUES (?,?,?,?,?,?) ON CONFLICT(name) DO UPDATE SET hostname = excluded.hostname,"
      " version = excluded.version, slots = excluded.slots,"
      " registered_ms = excluded.registered_ms, last_seen_ms = excluded.last_seen_ms");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, request.worker_name())
      .Bind(2, request.hostname())
      .Bind(3, request.version())
      .BindBlob(4, stored.SerializeAsString())
      .Bind(5, now_ms)
      .Bind(6, now_ms);
  if (absl::Status s = stmt->Run(); !s.ok()) return s;
  absl::StatusOr<Stmt> id = db.PrepareCached("SELECT id FROM workers WHERE name = ?");
  if (!id.ok()) return id.status();
  id->Bind(1, request.worker_name());
  absl::StatusOr<bool> row = id->Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::InternalError("worker row vanished after upsert");
  return id->Int(0);
}

absl::Status TouchWorker(Db& db, int64_t worker_id, int64_t now_ms) {
  absl::StatusOr<Stmt> stmt = db.PrepareCached("UPDATE workers SET last_seen_ms = ? WHERE id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, now_ms).Bind(2, worker_id);
  return stmt->Run();
}

absl::Status AddToCounter(Db& db, const std::string& name, int64_t delta) {
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      "INSERT INTO counters (name, value) VALUES (?1, ?2)"
      " ON CONFLICT (name) DO UPDATE SET value = value + excluded.value");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, name).Bind(2, delta);
  return stmt->Run();
}

absl::Status MarkSweepCancelled(Db& db, int64_t sweep_id) {
  absl::StatusOr<Stmt> stmt = db.PrepareCached("UPDATE sweeps SET cancelled = 1 WHERE id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, sweep_id);
  return stmt->Run();
}

absl::StatusOr<int64_t> InsertFit(Db& db, const xmod::v1::Fit& fit) {
  absl::StatusOr<Stmt> stmt = db.PrepareCached(
      "INSERT INTO fits (sweep_id, created_ms, params, r2, rmse, mae, n_obs, cv, fit, error,"
      " study_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
  if (!stmt.ok()) return stmt.status();
  stmt->BindOptional(1, NullIfZero(fit.sweep_id())).Bind(2, fit.created_unix_ms());
  stmt->BindOptional(11, NullIfZero(fit.study_id()));
  if (!fit.error().empty()) {
    stmt->BindNull(3).BindNull(4).BindNull(5).BindNull(6).BindNull(7).BindNull(8).BindNull(9);
    stmt->Bind(10, fit.error());
  } else {
    absl::StatusOr<std::string> params = ProtoJson(fit.params(), JsonLayout::kLine);
    if (!params.ok()) return params.status();
    std::vector<std::string> groups;
    for (const xmod::v1::GroupError& g : fit.cv()) {
      absl::StatusOr<std::string> json = ProtoJson(g, JsonLayout::kLine);
      if (!json.ok()) return json.status();
      groups.push_back(*std::move(json));
    }
    xmod::v1::Fit blob = fit;
    blob.clear_id();
    stmt->Bind(3, *params).Bind(4, fit.r2()).Bind(5, fit.rmse()).Bind(6, fit.mae());
    stmt->Bind(7, fit.n_obs()).Bind(8, absl::StrCat("[", absl::StrJoin(groups, ","), "]"));
    stmt->BindBlob(9, blob.SerializeAsString()).Bind(10, "");
  }
  if (absl::Status s = stmt->Run(); !s.ok()) return s;
  return db.LastInsertRowId();
}

}  // namespace xmod
