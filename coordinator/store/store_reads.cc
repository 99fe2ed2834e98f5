// See store_reads.h.
#include "coordinator/store/store_reads.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/store/run_progress.h"
#include "google/protobuf/util/json_util.h"
#include "trainer_contract/series.h"

namespace xmod {

using xmod::v1::RunState;

// GPU-seconds of attempt member `g` of attempt `t` (their SQL aliases in both reads below): its
// slots if they are CUDA ones, times the attempt's time (an open attempt up to now).
#define XMOD_GPU_SECONDS_OF_G_IN_T                                                       \
  "CASE WHEN g.slot_kind = 'cuda' THEN json_array_length(g.slots) * (COALESCE("          \
  "t.ended_ms, CAST(strftime('%s', 'now') AS INTEGER) * 1000) - t.started_ms) / 1000.0 " \
  "ELSE 0 END"

const char* const kRunColumns =
    "r.id, r.sweep_id, r.label, r.name, r.spec, r.state, r.attempts, r.max_attempts, r.step,"
    " r.tokens, r.flops_done, r.flop_budget, r.train_loss, r.val_loss, r.tokens_per_second,"
    " (SELECT t.worker FROM attempts t WHERE t.run_id = r.id AND t.ended_ms IS NULL"
    "   ORDER BY t.attempt DESC LIMIT 1),"
    " r.error, r.created_ms, r.started_ms, r.finished_ms, r.priority, r.held_out,"
    " r.forward_flops_per_token, r.total_params,"
    " (SELECT d.delta FROM live_delta d WHERE d.run_id = r.id ORDER BY d.flops DESC LIMIT 1),"
    " (SELECT MAX(d.flops) FROM live_delta d WHERE d.run_id = r.id),"
    " EXISTS (SELECT 1 FROM censored_runs c WHERE c.run_id = r.id), r.preemptible,"
    " (SELECT COUNT(*) FROM attempts p WHERE p.run_id = r.id AND p.preempt_reason IS NOT NULL),"
    " (SELECT p.preempt_reason FROM attempts p WHERE p.run_id = r.id"
    " AND p.preempt_reason IS NOT NULL ORDER BY p.attempt DESC LIMIT 1),"
    " (SELECT MAX(g.peak_gpu_memory_bytes) FROM attempt_members g WHERE g.run_id = r.id),"
    " (SELECT SUM(" XMOD_GPU_SECONDS_OF_G_IN_T
    ") FROM attempt_members g JOIN attempts t"
    "   ON t.run_id = g.run_id AND t.attempt = g.attempt WHERE g.run_id = r.id)";

namespace {

RunState ParseState(const std::string& name) {
  RunState state = xmod::v1::RUN_STATE_UNSPECIFIED;
  xmod::v1::RunState_Parse(name, &state);
  return state;
}

}  // namespace

xmod::v1::Run RunFromRow(const Stmt& s) {
  xmod::v1::Run run;
  run.set_id(s.Int(0));
  run.set_sweep_id(s.Int(1));
  run.set_label(s.Text(2));
  run.set_name(s.Text(3));
  run.mutable_spec()->ParseFromString(s.Text(4));
  run.set_state(ParseState(s.Text(5)));
  run.set_attempts(static_cast<int>(s.Int(6)));
  run.set_max_attempts(static_cast<int>(s.Int(7)));
  xmod::v1::Progress* p = run.mutable_progress();
  p->set_step(s.Int(8));
  p->set_tokens(s.Int(9));
  p->set_flops(s.Double(10));
  p->set_flop_budget(s.Double(11));
  p->set_train_loss(s.Double(12));
  p->set_val_loss(s.Double(13));
  p->set_tokens_per_second(s.Double(14));
  if (run.state() == xmod::v1::RUNNING) run.set_worker(s.Text(15));
  run.set_error(s.Text(16));
  run.set_created_unix_ms(s.Int(17));
  run.set_started_unix_ms(s.Int(18));
  run.set_finished_unix_ms(s.Int(19));
  run.set_priority(static_cast<int>(s.Int(20)));
  run.set_held_out(s.Int(21) != 0);
  run.set_forward_flops_per_token(s.Double(22));
  run.set_total_params(s.Double(23));
  if (!s.IsNull(24)) {
    p->set_live_delta(s.Double(24));
    p->set_live_delta_flops(s.Double(25));
  }
  run.set_censored(s.Int(26) != 0);
  CompleteProgress(&run);
  run.set_preemptible(s.Int(27) != 0);
  run.set_preemptions(static_cast<int>(s.Int(28)));
  if (!s.IsNull(29)) run.set_last_preemption(s.Text(29));
  run.set_peak_gpu_memory_bytes(s.Int(30));  // NULL: 0, not measured
  run.set_gpu_seconds(s.Double(31));
  return run;
}

namespace {

// `design_going` — an adaptive sweep whose design has not stopped — keeps the sweep active
// between a run's end and the next decision.
xmod::v1::SweepState SweepStateFrom(const xmod::v1::Sweep& sweep, bool cancelled,
                                    bool design_going) {
  const auto count = [&](RunState state) {
    auto it = sweep.run_counts().find(xmod::v1::RunState_Name(state));
    return it == sweep.run_counts().end() ? 0 : it->second;
  };
  if (count(xmod::v1::QUEUED) + count(xmod::v1::RUNNING) > 0) return xmod::v1::SWEEP_ACTIVE;
  if (design_going && !cancelled) return xmod::v1::SWEEP_ACTIVE;
  if (cancelled) return xmod::v1::SWEEP_CANCELLED;
  if (count(xmod::v1::FAILED) > 0) return xmod::v1::SWEEP_FAILED;
  return xmod::v1::SWEEP_DONE;
}

absl::Status FillSweep(Db& db, Stmt& row, xmod::v1::Sweep* sweep) {
  sweep->set_id(row.Int(0));
  sweep->set_name(row.Text(1));
  sweep->mutable_spec()->ParseFromString(row.Text(2));
  sweep->set_created_unix_ms(row.Int(4));
  sweep->set_submitter(row.Text(5));
  absl::StatusOr<Stmt> counts =
      db.Prepare("SELECT state, COUNT(*) FROM runs WHERE sweep_id = ? GROUP BY state");
  if (!counts.ok()) return counts.status();
  counts->Bind(1, sweep->id());
  while (true) {
    absl::StatusOr<bool> r = counts->Step();
    if (!r.ok()) return r.status();
    if (!*r) break;
    (*sweep->mutable_run_counts())[counts->Text(0)] = static_cast<int>(counts->Int(1));
  }
  bool design_going = false;
  if (sweep->spec().adaptive().enabled()) {
    absl::StatusOr<Stmt> stopped = db.Prepare(
        "SELECT 1 FROM design_decisions WHERE sweep_id = ? AND source = 'adaptive' AND stop = 1");
    if (!stopped.ok()) return stopped.status();
    absl::StatusOr<bool> found = stopped->Bind(1, sweep->id()).Step();
    if (!found.ok()) return found.status();
    design_going = !*found;
  }
  sweep->set_state(SweepStateFrom(*sweep, row.Int(3) != 0, design_going));
  return absl::OkStatus();
}

constexpr const char* kSweepColumns = "id, name, spec, cancelled, created_ms, submitter";

}  // namespace

absl::StatusOr<xmod::v1::Run> LoadRun(Db& db, int64_t run_id) {
  RunFilter filter;
  filter.run_ids = {run_id};
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = LoadRuns(db, filter);
  if (!runs.ok()) return runs.status();
  if (runs->empty()) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
  return std::move(runs->front());
}

absl::StatusOr<std::vector<xmod::v1::Run>> LoadRuns(Db& db, const RunFilter& filter) {
  std::vector<std::string> where;
  if (filter.sweep_id > 0) where.push_back(absl::StrCat("r.sweep_id = ", filter.sweep_id));
  if (!filter.states.empty()) {
    std::vector<std::string> names;
    for (RunState s : filter.states) {
      names.push_back(absl::StrCat("'", xmod::v1::RunState_Name(s), "'"));
    }
    where.push_back(absl::StrCat("r.state IN (", absl::StrJoin(names, ","), ")"));
  }
  if (!filter.run_ids.empty()) {
    where.push_back(absl::StrCat("r.id IN (", absl::StrJoin(filter.run_ids, ","), ")"));
  }
  std::string sql = absl::StrCat("SELECT ", kRunColumns, " FROM runs r");
  if (!where.empty()) absl::StrAppend(&sql, " WHERE ", absl::StrJoin(where, " AND "));
  absl::StrAppend(&sql, " ORDER BY r.id");
  if (filter.limit > 0) absl::StrAppend(&sql, " LIMIT ", filter.limit);
  absl::StatusOr<Stmt> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  std::vector<xmod::v1::Run> runs;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    runs.push_back(RunFromRow(*stmt));
  }
  return runs;
}

absl::StatusOr<xmod::v1::Sweep> LoadSweep(Db& db, int64_t sweep_id) {
  absl::StatusOr<Stmt> stmt =
      db.Prepare(absl::StrCat("SELECT ", kSweepColumns, " FROM sweeps WHERE id = ?"));
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, sweep_id);
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::NotFoundError(absl::StrCat("sweep ", sweep_id, " not found"));
  xmod::v1::Sweep sweep;
  if (absl::Status s = FillSweep(db, *stmt, &sweep); !s.ok()) return s;
  return sweep;
}

absl::StatusOr<std::vector<xmod::v1::Sweep>> LoadSweeps(Db& db, int limit) {
  std::string sql = absl::StrCat("SELECT ", kSweepColumns, " FROM sweeps ORDER BY id DESC");
  if (limit > 0) absl::StrAppend(&sql, " LIMIT ", limit);
  absl::StatusOr<Stmt> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  std::vector<xmod::v1::Sweep> sweeps;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    sweeps.emplace_back();
    if (absl::Status s = FillSweep(db, *stmt, &sweeps.back()); !s.ok()) return s;
  }
  return sweeps;
}

absl::StatusOr<std::vector<xmod::v1::Attempt>> LoadAttempts(Db& db, int64_t run_id) {
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "SELECT t.attempt, t.worker, t.started_ms, t.ended_ms, t.outcome, t.exit_code, t.error,"
      " t.resumed_from_step, MAX(g.peak_gpu_memory_bytes), SUM(" XMOD_GPU_SECONDS_OF_G_IN_T
      "), t.memory_plan"
      " FROM attempts t LEFT JOIN attempt_members g ON g.run_id = t.run_id"
      " AND g.attempt = t.attempt WHERE t.run_id = ? GROUP BY t.attempt ORDER BY t.attempt");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, run_id);
  std::vector<xmod::v1::Attempt> attempts;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    xmod::v1::Attempt& a = attempts.emplace_back();
    a.set_number(static_cast<int>(stmt->Int(0)));
    a.set_worker(stmt->Text(1));
    a.set_started_unix_ms(stmt->Int(2));
    a.set_ended_unix_ms(stmt->Int(3));
    a.set_outcome(stmt->Text(4));
    a.set_exit_code(static_cast<int>(stmt->Int(5)));
    a.set_error(stmt->Text(6));
    a.set_resumed_from_step(stmt->Int(7));
    a.set_peak_gpu_memory_bytes(stmt->Int(8));
    a.set_gpu_seconds(stmt->Double(9));
    a.set_memory_plan(stmt->Text(10));  // NULL: ""
  }
  return attempts;
}

namespace {

absl::StatusOr<std::vector<xmod::v1::Checkpoint>> SelectCheckpoints(Db& db, int64_t run_id,
                                                                    const char* tail) {
  absl::StatusOr<Stmt> stmt = db.Prepare(absl::StrCat(
      "SELECT step, tokens, flops, path, sha256, bytes FROM checkpoints WHERE run_id = ? ", tail));
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, run_id);
  std::vector<xmod::v1::Checkpoint> out;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    xmod::v1::Checkpoint& c = out.emplace_back();
    c.set_step(stmt->Int(0));
    c.set_tokens(stmt->Int(1));
    c.set_flops(stmt->Double(2));
    c.set_path(stmt->Text(3));
    c.set_sha256(stmt->Text(4));
    c.set_bytes(stmt->Int(5));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<xmod::v1::Checkpoint>> LoadCheckpoints(Db& db, int64_t run_id) {
  return SelectCheckpoints(db, run_id, "ORDER BY step, attempt");
}

absl::StatusOr<std::optional<xmod::v1::Checkpoint>> LatestCheckpoint(Db& db, int64_t run_id) {
  absl::StatusOr<std::vector<xmod::v1::Checkpoint>> c =
      SelectCheckpoints(db, run_id, "ORDER BY step DESC, attempt DESC LIMIT 1");
  if (!c.ok()) return c.status();
  if (c->empty()) return std::optional<xmod::v1::Checkpoint>();
  return std::optional<xmod::v1::Checkpoint>(c->front());
}

namespace {

// The query of LoadMetrics: the reported series, and the live matched-FLOP Δ
// (sweep_monitor.h) as SERIES_LIVE_DELTA at the steps of the val/loss points it was computed at;
// ?1 is the run, ?2... the `names` asked for (none: every series).
std::string MetricsQuery(const std::vector<std::string>& names) {
  std::string in_names;
  if (!names.empty()) {
    std::vector<std::string> marks;
    for (size_t i = 0; i < names.size(); ++i) marks.push_back(absl::StrCat("?", i + 2));
    in_names = absl::StrCat(" IN (", absl::StrJoin(marks, ","), ")");
  }
  const std::string live_delta = SqlString(SeriesName(xmod::v1::SERIES_LIVE_DELTA));
  std::string sql =
      "SELECT name, step, tokens, flops, value, attempt FROM canonical_metrics "
      "WHERE run_id = ?1";
  if (!names.empty()) absl::StrAppend(&sql, " AND name", in_names);
  absl::StrAppend(
      &sql, " UNION ALL SELECT ", live_delta,
      ", c.step, c.tokens, d.flops, d.delta, c.attempt"
      " FROM live_delta d JOIN canonical_metrics c ON c.run_id = d.run_id AND c.name = ",
      SqlString(SeriesName(xmod::v1::SERIES_VAL_LOSS)),
      " AND c.flops = d.flops WHERE d.run_id = ?1");
  if (!names.empty()) absl::StrAppend(&sql, " AND ", live_delta, in_names);
  absl::StrAppend(&sql, " ORDER BY 1, 4, 2, 6");
  return sql;
}

// `points` (one series, in order) into `series`, at most `max_points` of them (0: all):
// evenly spaced indices from the first to the last.
void Downsample(std::vector<xmod::v1::MetricPoint> points, int max_points,
                xmod::v1::MetricSeries* series) {
  const size_t n = points.size();
  const size_t cap = max_points > 0 ? static_cast<size_t>(max_points) : n;
  if (n <= cap) {
    for (auto& p : points) *series->add_points() = std::move(p);
    return;
  }
  // Evenly spaced indices from 0 to n - 1 inclusive.
  for (size_t i = 0; i < cap; ++i) {
    const size_t index = cap == 1 ? n - 1 : i * (n - 1) / (cap - 1);
    *series->add_points() = points[index];
  }
}

}  // namespace

absl::StatusOr<std::vector<xmod::v1::MetricSeries>> LoadMetrics(
    Db& db, int64_t run_id, const std::vector<std::string>& names, int max_points) {
  absl::StatusOr<Stmt> stmt = db.Prepare(MetricsQuery(names));
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, run_id);
  for (size_t i = 0; i < names.size(); ++i) stmt->Bind(static_cast<int>(i + 2), names[i]);
  std::map<std::string, std::vector<xmod::v1::MetricPoint>> by_name;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    xmod::v1::MetricPoint& p = by_name[stmt->Text(0)].emplace_back();
    p.set_name(stmt->Text(0));
    p.set_step(stmt->Int(1));
    p.set_tokens(stmt->Int(2));
    p.set_flops(stmt->RealOrNaN(3));  // text there is how InsertMetrics keeps NaN
    p.set_value(stmt->RealOrNaN(4));
  }
  std::vector<xmod::v1::MetricSeries> out;
  for (auto& [name, points] : by_name) {
    xmod::v1::MetricSeries& series = out.emplace_back();
    series.set_name(name);
    Downsample(std::move(points), max_points, &series);
  }
  return out;
}

absl::Status LoadRunMetrics(Db& db, const xmod::v1::GetMetricsRequest& request,
                            xmod::v1::GetMetricsResponse* out) {
  if (absl::Status s = LoadRun(db, request.run_id()).status(); !s.ok()) return s;
  const std::vector<std::string> names(request.names().begin(), request.names().end());
  const int max_points = request.max_points() > 0 ? request.max_points() : kDefaultMetricPoints;
  absl::StatusOr<std::vector<xmod::v1::MetricSeries>> series =
      LoadMetrics(db, request.run_id(), names, max_points);
  if (!series.ok()) return series.status();
  for (auto& one : *series) *out->add_series() = std::move(one);
  return absl::OkStatus();
}

namespace {

// The newest fits row whose `owner` column ("sweep_id" or "study_id") is `id`, with
// (failed = true) or without an error.
absl::StatusOr<std::optional<xmod::v1::Fit>> LoadNewestFitRow(Db& db, const char* owner, int64_t id,
                                                              bool failed) {
  absl::StatusOr<Stmt> stmt = db.Prepare(absl::StrCat(
      "SELECT id, sweep_id, created_ms, fit, params, r2, rmse, mae, n_obs, error, study_id"
      " FROM fits WHERE ",
      owner, " = ? AND error ", failed ? "<> ''" : "= ''", " ORDER BY id DESC LIMIT 1"));
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, id);
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<xmod::v1::Fit>();
  xmod::v1::Fit fit;
  if (!failed) {
    if (!stmt->IsNull(3)) fit.ParseFromString(stmt->Text(3));
    if (!fit.has_params()) {
      // A malformed params column leaves the parameters at zero; the row's other fields stand.
      (void)google::protobuf::util::JsonStringToMessage(stmt->Text(4), fit.mutable_params());
    }
    if (!stmt->IsNull(5)) fit.set_r2(stmt->Double(5));
    if (!stmt->IsNull(6)) fit.set_rmse(stmt->Double(6));
    if (!stmt->IsNull(7)) fit.set_mae(stmt->Double(7));
    fit.set_n_obs(static_cast<int>(stmt->Int(8)));
  }
  fit.set_id(stmt->Int(0));
  fit.set_sweep_id(stmt->Int(1));
  fit.set_created_unix_ms(stmt->Int(2));
  fit.set_error(stmt->Text(9));
  fit.set_study_id(stmt->IsNull(10) ? 0 : stmt->Int(10));
  return std::optional<xmod::v1::Fit>(std::move(fit));
}

absl::StatusOr<LatestFits> LoadLatestFitsOf(Db& db, const char* owner, int64_t id) {
  LatestFits out;
  absl::StatusOr<std::optional<xmod::v1::Fit>> ok = LoadNewestFitRow(db, owner, id, false);
  if (!ok.ok()) return ok.status();
  absl::StatusOr<std::optional<xmod::v1::Fit>> failed = LoadNewestFitRow(db, owner, id, true);
  if (!failed.ok()) return failed.status();
  out.ok = *std::move(ok);
  if (*failed && (!out.ok || (*failed)->id() > out.ok->id())) out.failed = *std::move(failed);
  return out;
}

}  // namespace

absl::StatusOr<LatestFits> LoadLatestFits(Db& db, int64_t sweep_id) {
  return LoadLatestFitsOf(db, "sweep_id", sweep_id);
}

absl::StatusOr<LatestFits> LoadLatestStudyFits(Db& db, int64_t study_id) {
  return LoadLatestFitsOf(db, "study_id", study_id);
}

}  // namespace xmod
