// Tables of xmod.v1 records (see render.h).
#include "cli/render.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/proto_json.h"
#include "model/accounting/accounting.h"

namespace xmod::cli {
namespace {

using xmod::v1::Run;

bool IsSparse(xmod::v1::Architecture arch) {
  return arch != xmod::v1::DENSE && arch != xmod::v1::MOE;
}

Cell KCell(const Run& run) {
  const auto& m = run.spec().model();
  return IsSparse(m.arch()) ? Cell::Int(m.k()) : Cell::Null();
}
Cell ACell(const Run& run) {
  const auto& m = run.spec().model();
  return IsSparse(m.arch()) && m.arch() != xmod::v1::MOD ? Cell::Num(m.a()) : Cell::Null();
}
Cell LossCell(double loss) {
  return loss == 0 || std::isnan(loss) ? Cell::Null() : Cell::Shown(FormatLoss(loss));
}
Cell FlopsCell(double flops) { return Cell::Shown(FormatFlops(flops)); }
Cell ParamsCell(double params) {
  return params == 0 ? Cell::Null() : Cell::Shown(FormatParams(params));
}
// Shown as local time (left-aligned, like text).
Cell TimeCell(int64_t unix_ms) {
  return unix_ms <= 0 ? Cell::Null() : Cell::Str(FormatUnixMs(unix_ms));
}
Cell StrOrNull(const std::string& s) { return s.empty() ? Cell::Null() : Cell::Str(s); }

// The run's live matched-FLOP Δ ("+0.0123"), "-" before its reference covers a mark;
// a censored (stopped early) run says so.
Cell LiveDeltaCell(const Run& r) {
  if (!r.progress().has_live_delta()) return Cell::Null();
  return Cell::Shown(absl::StrFormat("%+.4f%s", r.progress().live_delta(),
                                     r.censored() ? " (stopped early)" : ""));
}

Table KeyValue(std::string title) {
  Table t;
  t.title = std::move(title);
  t.columns = {"field", "value"};
  return t;
}

void AddLaw(Table* t, const xmod::v1::LawParams& p, const xmod::v1::LawParams* low,
            const xmod::v1::LawParams* high) {
  const auto* d = p.GetDescriptor();
  const auto* r = p.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    std::vector<Cell> row = {Cell::Str(f->name()), Cell::Num(r->GetDouble(p, f))};
    if (low != nullptr) {
      row.push_back(Cell::Num(r->GetDouble(*low, f)));
      row.push_back(Cell::Num(r->GetDouble(*high, f)));
    }
    t->AddRow(std::move(row));
  }
}

}  // namespace

std::string RunStateName(xmod::v1::RunState state) {
  std::string name = xmod::v1::RunState_Name(state);
  return name.empty() ? absl::StrCat(static_cast<int>(state)) : absl::AsciiStrToLower(name);
}

std::string SweepStateName(xmod::v1::SweepState state) {
  std::string name = xmod::v1::SweepState_Name(state);
  if (name.empty()) return absl::StrCat(static_cast<int>(state));
  absl::string_view view = name;
  absl::ConsumePrefix(&view, "SWEEP_");
  return absl::AsciiStrToLower(view);
}

std::string ArchName(xmod::v1::Architecture arch) {
  std::string name = xmod::v1::Architecture_Name(arch);
  return name.empty() ? absl::StrCat(static_cast<int>(arch)) : absl::AsciiStrToLower(name);
}

double RunBudget(const Run& run) {
  return run.progress().flop_budget() > 0 ? run.progress().flop_budget()
                                          : run.spec().training().flop_budget();
}

std::string EndedShortNote(const Run& run) {
  const xmod::v1::Progress& p = run.progress();
  const double budget = RunBudget(run);
  if (run.state() != xmod::v1::SUCCEEDED || p.planned_steps() < 1 || !(p.flops() < budget)) {
    return "";
  }
  return absl::StrCat("ended at step ", p.step(), " of ", p.planned_steps(),
                      ": budget reached in the last whole step (", FormatFlops(p.flops()), " of ",
                      FormatFlops(budget), " FLOPs)");
}

absl::Status PrintJson(std::ostream& out, const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ProtoJson(message);
  if (!json.ok()) return json.status();
  out << *json;
  return absl::OkStatus();
}

Table SweepsTable(const std::vector<xmod::v1::Sweep>& sweeps) {
  Table t;
  t.columns = {"id",      "name",      "state",  "runs",      "queued",
               "running", "succeeded", "failed", "cancelled", "created"};
  for (const auto& s : sweeps) {
    auto count = [&](const char* state) {
      auto it = s.run_counts().find(state);
      return it == s.run_counts().end() ? 0 : it->second;
    };
    int total = 0;
    for (const auto& [state, n] : s.run_counts()) total += n;
    t.AddRow({Cell::Int(s.id()), Cell::Str(s.name()), Cell::Str(SweepStateName(s.state())),
              Cell::Int(total), Cell::Int(count("QUEUED")), Cell::Int(count("RUNNING")),
              Cell::Int(count("SUCCEEDED")), Cell::Int(count("FAILED")),
              Cell::Int(count("CANCELLED")), TimeCell(s.created_unix_ms())});
  }
  return t;
}

Table SweepSummaryTable(const xmod::v1::Sweep& sweep) {
  Table t = KeyValue("Sweep");
  t.AddRow({Cell::Str("id"), Cell::Int(sweep.id())});
  t.AddRow({Cell::Str("name"), Cell::Str(sweep.name())});
  t.AddRow({Cell::Str("state"), Cell::Str(SweepStateName(sweep.state()))});
  t.AddRow({Cell::Str("created"), TimeCell(sweep.created_unix_ms())});
  if (!sweep.spec().description().empty()) {
    t.AddRow({Cell::Str("description"), Cell::Str(sweep.spec().description())});
  }
  for (const char* state : {"QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"}) {
    auto it = sweep.run_counts().find(state);
    t.AddRow({Cell::Str(absl::AsciiStrToLower(state)),
              Cell::Int(it == sweep.run_counts().end() ? 0 : it->second)});
  }
  return t;
}

Table RunsTable(const std::vector<Run>& runs) {
  Table t;
  t.columns = {"id",       "sweep",    "name", "state",      "arch",     "K",          "A",     "L",
               "backbone", "progress", "step", "train_loss", "val_loss", "live_delta", "worker"};
  for (const auto& r : runs) {
    const auto& m = r.spec().model();
    t.AddRow({Cell::Int(r.id()), Cell::Int(r.sweep_id()), Cell::Str(r.name()),
              Cell::Str(RunStateName(r.state())), Cell::Str(ArchName(m.arch())), KCell(r), ACell(r),
              Cell::Int(r.spec().training().seq_len()), Cell::Str(m.backbone().name()),
              Cell::Shown(FormatPercent(r.progress().fraction())), Cell::Int(r.progress().step()),
              LossCell(r.progress().train_loss()), LossCell(r.progress().val_loss()),
              LiveDeltaCell(r), StrOrNull(r.worker())});
  }
  return t;
}

// "mean ± sd" of a replicate statistic with `format` for each; "-" without values.
Cell StatCell(const xmod::v1::ReplicateStat& stat, const char* format) {
  if (stat.n() == 0) return Cell::Null();
  const std::string mean = absl::StrFormat(format, stat.mean());
  if (stat.n() == 1) return Cell::Shown(mean);
  return Cell::Shown(absl::StrCat(mean, " ± ", absl::StrFormat("%.4f", stat.sd())));
}

Table RunGroupsTable(const std::vector<xmod::v1::RunGroup>& groups) {
  Table t;
  t.columns = {"first_id", "sweep", "configuration", "runs",     "states", "arch",       "K",
               "A",        "L",     "backbone",      "val_loss", "val_n",  "live_delta", "delta_n"};
  for (const auto& g : groups) {
    const Run& r = g.first();
    const auto& m = r.spec().model();
    std::vector<std::string> states;
    for (const auto& [state, count] : g.run_counts()) {
      states.push_back(absl::StrCat(absl::AsciiStrToLower(state), ":", count));
    }
    std::sort(states.begin(), states.end());
    t.AddRow({Cell::Int(r.id()), Cell::Int(r.sweep_id()), Cell::Str(g.name()),
              Cell::Int(g.run_ids_size()), Cell::Str(absl::StrJoin(states, " ")),
              Cell::Str(ArchName(m.arch())), KCell(r), ACell(r),
              Cell::Int(r.spec().training().seq_len()), Cell::Str(m.backbone().name()),
              StatCell(g.val_loss(), "%.4f"), Cell::Int(g.val_loss().n()),
              StatCell(g.live_delta(), "%+.4f"), Cell::Int(g.live_delta().n())});
  }
  return t;
}

Table PlannedRunsTable(const std::vector<Run>& runs) {
  Table t;
  t.columns = {"id",       "name",   "arch",          "K",           "A",      "L",
               "backbone", "params", "fwd_flops/tok", "flop_budget", "tokens", "tokens/N_act",
               "held_out"};
  for (const auto& r : runs) {
    const auto& m = r.spec().model();
    const double budget = RunBudget(r);
    const double fwd = r.forward_flops_per_token();
    // C = multiplier x forward FLOPs/token x tokens (TrainingSpec.train_flops_multiplier).
    const double n_tokens =
        fwd > 0 ? budget / (TrainFlopsMultiplier(r.spec().training()) * fwd) : 0;
    Cell tokens = fwd > 0 ? Cell::Shown(FormatParams(n_tokens)) : Cell::Null();
    // Tokens per active-equivalent parameter (N_act with embeddings, the paper's size axis).
    Cell per_param = Cell::Null();
    absl::StatusOr<Accounting> acc = Account(m, r.spec().training().seq_len());
    if (fwd > 0 && acc.ok() && acc->active_params > 0) {
      const double ratio = n_tokens / (acc->active_params + acc->embedding_params);
      per_param = Cell::Shown(absl::StrFormat("%.3g", ratio));
    }
    t.AddRow({r.id() ? Cell::Int(r.id()) : Cell::Null(), Cell::Str(r.name()),
              Cell::Str(ArchName(m.arch())), KCell(r), ACell(r),
              Cell::Int(r.spec().training().seq_len()), Cell::Str(m.backbone().name()),
              ParamsCell(r.total_params()), fwd > 0 ? FlopsCell(fwd) : Cell::Null(),
              FlopsCell(budget), tokens, per_param, Cell::Bool(r.held_out())});
  }
  return t;
}

namespace {

std::string ForecastTitle(const xmod::v1::SweepForecast& f) {
  std::string title = absl::StrCat("Forecast: ", FormatNumber(f.gpu_hours()), " GPU-hours and ",
                                   FormatNumber(f.cpu_slot_hours()), " CPU slot-hours");
  if (f.unmeasured_runs() > 0) {
    absl::StrAppend(&title, " (", f.unmeasured_runs(), " of ", f.runs_size(),
                    " runs with no finished run like them to go by)");
  }
  absl::StrAppend(&title, "; on the ", f.gpu_slots(), " GPU and ", f.cpu_slots(),
                  " CPU slots heard from in the last 10 minutes, ");
  absl::StrAppend(&title, f.wall_seconds() > 0
                              ? absl::StrCat("about ", FormatDuration(f.wall_seconds()),
                                             " of wall time if it ran alone")
                              : std::string("wall time unknown (no slots of a kind it needs)"));
  return title;
}

}  // namespace

Table ForecastTable(const xmod::v1::SweepForecast& forecast) {
  Table t;
  t.title = ForecastTitle(forecast);
  t.columns = {"run", "tokens", "tok/s", "device", "slot-hours", "from"};
  for (const xmod::v1::RunForecast& r : forecast.runs()) {
    t.AddRow({Cell::Str(r.name()), Cell::Num(r.tokens()),
              r.tokens_per_second() > 0 ? Cell::Num(r.tokens_per_second()) : Cell::Null(),
              StrOrNull(r.device()), r.slot_hours() > 0 ? Cell::Num(r.slot_hours()) : Cell::Null(),
              Cell::Str(r.source())});
  }
  return t;
}

Table RunSummaryTable(const xmod::v1::GetRunResponse& response) {
  const Run& r = response.run();
  const auto& m = r.spec().model();
  const auto& p = r.progress();
  double budget = RunBudget(r);
  Table t = KeyValue("Run");
  t.AddRow({Cell::Str("id"), Cell::Int(r.id())});
  t.AddRow({Cell::Str("sweep"), Cell::Int(r.sweep_id())});
  t.AddRow({Cell::Str("name"), Cell::Str(r.name())});
  t.AddRow({Cell::Str("label"), StrOrNull(r.label())});
  t.AddRow({Cell::Str("state"), Cell::Str(RunStateName(r.state()))});
  t.AddRow({Cell::Str("waiting"), StrOrNull(response.pending_reason())});
  t.AddRow({Cell::Str("arch"), Cell::Str(ArchName(m.arch()))});
  t.AddRow({Cell::Str("backbone"), Cell::Str(m.backbone().name())});
  t.AddRow({Cell::Str("K"), KCell(r)});
  t.AddRow({Cell::Str("A"), ACell(r)});
  t.AddRow({Cell::Str("L"), Cell::Int(r.spec().training().seq_len())});
  t.AddRow({Cell::Str("total_params"), ParamsCell(r.total_params())});
  t.AddRow({Cell::Str("fwd_flops/token"), FlopsCell(r.forward_flops_per_token())});
  t.AddRow({Cell::Str("flop_budget"), FlopsCell(budget)});
  t.AddRow({Cell::Str("flops_spent"), FlopsCell(p.flops())});
  t.AddRow({Cell::Str("progress"), Cell::Shown(FormatPercent(p.fraction()))});
  t.AddRow({Cell::Str("step"), Cell::Int(p.step())});
  t.AddRow({Cell::Str("planned_steps"),
            p.planned_steps() > 0 ? Cell::Int(p.planned_steps()) : Cell::Null()});
  if (std::string note = EndedShortNote(r); !note.empty()) {
    t.AddRow({Cell::Str("note"), Cell::Str(note)});
  }
  t.AddRow({Cell::Str("tokens"), Cell::Int(p.tokens())});
  t.AddRow({Cell::Str("train_loss"), LossCell(p.train_loss())});
  t.AddRow({Cell::Str("val_loss"), LossCell(p.val_loss())});
  t.AddRow({Cell::Str("tokens/s"), p.tokens_per_second() > 0
                                       ? Cell::Shown(FormatRate(p.tokens_per_second()))
                                       : Cell::Null()});
  t.AddRow(
      {Cell::Str("attempts"), Cell::Str(absl::StrCat(r.attempts(), " of ", r.max_attempts()))});
  t.AddRow({Cell::Str("worker"), StrOrNull(r.worker())});
  t.AddRow({Cell::Str("created"), TimeCell(r.created_unix_ms())});
  t.AddRow({Cell::Str("started"), TimeCell(r.started_unix_ms())});
  t.AddRow({Cell::Str("finished"), TimeCell(r.finished_unix_ms())});
  t.AddRow({Cell::Str("error"), StrOrNull(r.error())});
  return t;
}

Table AttemptsTable(const xmod::v1::GetRunResponse& response) {
  Table t;
  t.title = "Attempts";
  t.columns = {"attempt", "worker",      "outcome",      "started",     "duration", "exit",
               "gpu mem", "gpu-seconds", "resumed_from", "memory_plan", "error"};
  for (const auto& a : response.attempts()) {
    Cell duration = Cell::Null();
    if (a.started_unix_ms() > 0 && a.ended_unix_ms() >= a.started_unix_ms()) {
      double s = (a.ended_unix_ms() - a.started_unix_ms()) / 1000.0;
      duration = Cell::Shown(FormatDuration(s));
    }
    t.AddRow({Cell::Int(a.number()), StrOrNull(a.worker()), Cell::Str(a.outcome()),
              TimeCell(a.started_unix_ms()), duration, Cell::Int(a.exit_code()),
              a.peak_gpu_memory_bytes() > 0 ? Cell::Shown(FormatBytes(a.peak_gpu_memory_bytes()))
                                            : Cell::Null(),
              a.gpu_seconds() > 0 ? Cell::Num(a.gpu_seconds()) : Cell::Null(),
              Cell::Int(a.resumed_from_step()), StrOrNull(a.memory_plan()), StrOrNull(a.error())});
  }
  return t;
}

Table CheckpointsTable(const xmod::v1::GetRunResponse& response) {
  Table t;
  t.title = "Checkpoints";
  t.columns = {"step", "tokens", "flops", "bytes", "sha256", "path"};
  for (const auto& c : response.checkpoints()) {
    t.AddRow({Cell::Int(c.step()), Cell::Int(c.tokens()), FlopsCell(c.flops()),
              Cell::Shown(FormatParams(c.bytes())), Cell::Str(c.sha256().substr(0, 12)),
              Cell::Str(c.path())});
  }
  return t;
}

Table MetricsTable(const xmod::v1::GetMetricsResponse& response) {
  Table t;
  t.columns = {"name", "step", "tokens", "flops", "value"};
  for (const auto& series : response.series()) {
    for (const auto& p : series.points()) {
      t.AddRow({Cell::Str(series.name()), Cell::Int(p.step()), Cell::Int(p.tokens()),
                FlopsCell(p.flops()), Cell::Num(p.value())});
    }
  }
  return t;
}

Table QueryTable(const xmod::v1::QueryResponse& response) {
  Table t;
  t.columns.assign(response.columns().begin(), response.columns().end());
  for (const auto& row : response.rows()) {
    std::vector<Cell> cells;
    for (const auto& v : row.values()) {
      double d = 0;
      if (v.empty()) {
        cells.push_back(Cell::Null());
      } else if (absl::SimpleAtod(v, &d) && std::isfinite(d) &&
                 v.find_first_not_of("0123456789+-.eE") == std::string::npos) {
        // Integers print as they are; reals as numbers with up to 4 decimals.
        bool integral = v.find_first_of(".eE") == std::string::npos;
        cells.push_back(integral ? Cell{v, /*numeric=*/true} : Cell::Num(d));
      } else {
        cells.push_back(Cell::Str(v));
      }
    }
    t.AddRow(std::move(cells));
  }
  return t;
}

Table FitParamsTable(const xmod::v1::Fit& fit) {
  Table t;
  t.title = "Law parameters (paper Eq. 14)";
  bool ci = fit.has_ci_low() && fit.has_ci_high();
  t.columns = {"param", "value"};
  if (ci) {
    t.columns.push_back("ci_low");
    t.columns.push_back("ci_high");
  }
  AddLaw(&t, fit.params(), ci ? &fit.ci_low() : nullptr, ci ? &fit.ci_high() : nullptr);
  return t;
}

Table FitSummaryTable(const xmod::v1::Fit& fit) {
  Table t = KeyValue("Fit");
  t.AddRow({Cell::Str("id"), Cell::Int(fit.id())});
  if (fit.study_id() != 0) {
    t.AddRow({Cell::Str("study"), Cell::Int(fit.study_id())});
  } else {
    t.AddRow({Cell::Str("sweep"), Cell::Int(fit.sweep_id())});
  }
  t.AddRow({Cell::Str("created"), TimeCell(fit.created_unix_ms())});
  t.AddRow({Cell::Str("observations"), Cell::Int(fit.n_obs())});
  t.AddRow({Cell::Str("r2_delta"), Cell::Shown(absl::StrFormat("%.4f", fit.r2()))});
  t.AddRow({Cell::Str("rmse"), Cell::Shown(absl::StrFormat("%.5f", fit.rmse()))});
  t.AddRow({Cell::Str("mae"), Cell::Shown(absl::StrFormat("%.5f", fit.mae()))});
  t.AddRow({Cell::Str("stages"), Cell::Str(fit.by_sweep() ? "by sweep" : "by A")});
  t.AddRow({Cell::Str("e_stage2"),
            fit.by_sweep() ? Cell::Shown(absl::StrFormat("%.5f", fit.e_stage2())) : Cell::Null()});
  t.AddRow({Cell::Str("at_bound"),
            fit.at_bound().empty() ? Cell::Null() : Cell::Str(absl::StrJoin(fit.at_bound(), ","))});
  t.AddRow({Cell::Str("error"), StrOrNull(fit.error())});
  return t;
}

Table StudiesTable(const std::vector<xmod::v1::Study>& studies) {
  Table t;
  t.columns = {"name", "id", "members", "created", "description"};
  for (const xmod::v1::Study& s : studies) {
    std::vector<std::string> members;
    for (const xmod::v1::StudyMember& m : s.spec().members()) {
      members.push_back(absl::StrCat(m.role(), "=", m.sweep_id()));
    }
    t.AddRow({Cell::Str(s.spec().name()), Cell::Int(s.id()), Cell::Str(absl::StrJoin(members, " ")),
              TimeCell(s.created_unix_ms()), StrOrNull(s.spec().description())});
  }
  return t;
}

Table StudySummaryTable(const xmod::v1::Study& study) {
  Table t = KeyValue("Study");
  t.AddRow({Cell::Str("name"), Cell::Str(study.spec().name())});
  t.AddRow({Cell::Str("id"), Cell::Int(study.id())});
  t.AddRow({Cell::Str("description"), StrOrNull(study.spec().description())});
  t.AddRow({Cell::Str("created"), TimeCell(study.created_unix_ms())});
  t.AddRow({Cell::Str("seed"), Cell::Int(static_cast<int64_t>(study.spec().seed()))});
  t.AddRow({Cell::Str("bootstrap_samples"), Cell::Int(study.spec().bootstrap_samples())});
  return t;
}

Table StudyMembersTable(const xmod::v1::Study& study) {
  Table t;
  t.title = "Members";
  t.columns = {"sweep", "name", "role"};
  for (const xmod::v1::StudyMember& m : study.spec().members()) {
    t.AddRow({Cell::Int(m.sweep_id()), Cell::Str(m.sweep_name()), Cell::Str(m.role())});
  }
  return t;
}

Table FitCvTable(const xmod::v1::Fit& fit) {
  Table t;
  t.title = "Held-out groups (grouped CV)";
  t.columns = {"group", "rmse", "n"};
  for (const auto& g : fit.cv()) {
    t.AddRow(
        {Cell::Str(g.group()), Cell::Shown(absl::StrFormat("%.5f", g.rmse())), Cell::Int(g.n())});
  }
  return t;
}

Table PredictionsTable(const std::vector<xmod::v1::Prediction>& predictions) {
  Table t;
  t.columns = {"C", "L", "backbone", "K", "A", "delta", "loss", "delta_low", "delta_high"};
  for (const auto& p : predictions) {
    const auto& pt = p.point();
    bool interval = p.delta_low() != 0 || p.delta_high() != 0;
    t.AddRow({FlopsCell(pt.flops()), Cell::Int(pt.seq_len()), Cell::Str(pt.backbone()),
              Cell::Int(pt.k()), Cell::Num(pt.a()),
              Cell::Shown(absl::StrFormat("%+.4f", p.delta())), LossCell(p.loss()),
              interval ? Cell::Shown(absl::StrFormat("%+.4f", p.delta_low())) : Cell::Null(),
              interval ? Cell::Shown(absl::StrFormat("%+.4f", p.delta_high())) : Cell::Null()});
  }
  return t;
}

}  // namespace xmod::cli
