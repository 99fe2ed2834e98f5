// The xmodctl command line (see app.h): CLI11 subcommands bound to the functions of
// commands.h.
#include "cli/app.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cli/commands.h"
#include "cli/completion.h"
#include "common/command_line.h"
#include "common/credentials.h"

namespace xmod::cli {
namespace {

// Global options, filled by CLI11 then turned into a Context.
struct Globals {
  std::string addr = kDefaultAddr;
  std::string token_flag;  // refused: secrets never come from argv
  std::string token_file;
  ClientTlsFiles tls;
  std::string output = "table";
  double timeout_s = 30;
};

// Overwrites `value` with environment variable `name` when it is set and not empty.
void FromEnv(const char* name, std::string* value) {
  if (const char* env = std::getenv(name); env != nullptr && *env) *value = env;
}

// Binds the subcommands to `action`; every value they parse lives in `state`.
struct State {
  Globals globals;
  // sweep
  std::string file;
  bool dry_run = false;
  bool no_redraw = false;
  int64_t id = 0;
  int limit = 0;
  // runs / metrics / query
  RunsListOptions runs;
  std::vector<std::string> names;
  int max_points = 0;  // 0: the coordinator's default (kDefaultMetricPoints, 500)
  std::string sql;
  int max_rows = 0;  // 0: the coordinator's row cap (QueryLimits::max_rows, 10000)
  // fit
  std::string study;
  PredictOptions predict;
  RecommendOptions recommend;
  ProposeOptions propose;
  // study
  StudyCreateOptions study_create;
  // plan
  PlanOptions plan;
  // report
  ReportOptions report;
  // pilot
  PilotSelectOptions pilot;
  // usage
  std::string usage_window = "24h";
  // events
  EventsOptions events;
  std::string events_actor;
};

using Action = std::function<absl::Status(const Context&)>;

CLI::App* Leaf(CLI::App* parent, const std::string& name, const std::string& help, Action* slot,
               Action action) {
  CLI::App* sub = parent->add_subcommand(name, help);
  sub->callback([slot, action = std::move(action)] { *slot = action; });
  return sub;
}

// A subcommand taking one id: `PARENT NAME ID`.
struct IdCommand {
  const char* name;
  const char* help;
  absl::Status (*fn)(const Context&, int64_t);
};

void AddIdCommands(CLI::App* parent, const char* id_help, State& s, Action* action,
                   std::initializer_list<IdCommand> commands) {
  for (const IdCommand& cmd : commands) {
    auto fn = cmd.fn;
    CLI::App* sub = Leaf(parent, cmd.name, cmd.help, action,
                         [&s, fn](const Context& c) { return fn(c, s.id); });
    sub->add_option("ID", s.id, id_help)->required();
  }
}

void AddSweepCommands(CLI::App& app, State& s, Action* action) {
  CLI::App* sweep =
      app.add_subcommand("sweep", "Submit, list, show, cancel, retry and watch sweeps");
  sweep->require_subcommand(1);
  CLI::App* submit =
      Leaf(sweep, "submit",
           "Submit a sweep spec (.textpb/.txtpb/.pbtxt or .json; - reads standard input)", action,
           [&s](const Context& c) { return SweepSubmit(c, s.file, s.dry_run); });
  submit->add_option("FILE", s.file, "Sweep spec file, or - for standard input")->required();
  submit->add_flag("--dry_run", s.dry_run, "Validate and expand only; store nothing");
  CLI::App* list = Leaf(sweep, "list", "List sweeps, newest first", action,
                        [&s](const Context& c) { return SweepList(c, s.limit); });
  list->add_option("--limit", s.limit, "At most this many sweeps (0 = all)");
  AddIdCommands(sweep, "Sweep id", s, action,
                {{"show", "A sweep and its runs", &SweepShow},
                 {"cancel", "Cancel every queued or running run", &SweepCancel},
                 {"retry", "Requeue the failed runs (RetryFailed)", &SweepRetry}});
  CLI::App* watch =
      Leaf(sweep, "watch",
           "Live progress until the sweep ends: a table redrawn in place on a "
           "terminal, else one line per change",
           action, [&s](const Context& c) { return SweepWatch(c, s.id, s.no_redraw); });
  watch->add_option("ID", s.id, "Sweep id")->required();
  watch->add_flag("--no_redraw,--no-redraw", s.no_redraw,
                  "Print one line per change even on a terminal (the line log)");
}

// A comma-separated, repeatable option.
template <typename T>
void AddListOption(CLI::App* command, const std::string& name, std::vector<T>& values,
                   const std::string& help) {
  command->add_option(name, values, help)->delimiter(',')->allow_extra_args(false);
}

void AddRunsListOptions(CLI::App* list, RunsListOptions& o) {
  list->add_option("--sweep", o.sweep_id, "Only this sweep's runs");
  AddListOption(list, "--state", o.states, "Only runs in these states (queued, running, ...)");
  AddListOption(list, "--arch", o.archs, "Only these architectures (dense, xmod, mod, moe, ...)");
  AddListOption(list, "--K", o.ks, "Only these K");
  AddListOption(list, "--A", o.as, "Only these anchor strides A (0: runs without one)");
  AddListOption(list, "--L", o.seq_lens, "Only these context lengths L");
  AddListOption(list, "--backbone", o.backbones, "Only these backbones");
  AddListOption(list, "--label", o.labels, "Only runs of these grid labels");
  list->add_option("--name", o.name_contains, "Only runs whose name contains this");
  list->add_option("--sort", o.sort,
                   "Sort key: id, name, state, arch, k, a, seq_len, backbone, val_loss, created");
  list->add_flag("--desc", o.descending, "Descending order");
  list->add_option("--page_size", o.page_size, "Entries a page (0 = all; at most 1000)");
  list->add_option("--page_token", o.page_token, "The next page of an earlier listing");
  list->add_option("--group", o.group,
                   "replicates: one row a configuration (its seeds: mean ± sd, n)");
  list->add_option("--limit", o.limit, "At most this many entries (0 = all)");
}

void AddRunCommands(CLI::App& app, State& s, Action* action) {
  CLI::App* runs = app.add_subcommand("runs", "List runs");
  runs->require_subcommand(1);
  CLI::App* list = Leaf(runs, "list", "List runs (filtered, sorted, paged, grouped)", action,
                        [&s](const Context& c) { return RunsList(c, s.runs); });
  AddRunsListOptions(list, s.runs);

  CLI::App* run = app.add_subcommand("run", "Show, resume or cancel one run");
  run->require_subcommand(1);
  AddIdCommands(run, "Run id", s, action,
                {{"show", "A run with its attempts and checkpoints", &RunShow},
                 {"resume", "Requeue a failed or cancelled run from its checkpoint", &RunResume},
                 {"cancel", "Cancel a run (stops it if running)", &RunCancel}});

  CLI::App* metrics =
      Leaf(&app, "metrics", "Metric series of a run (downsampled)", action,
           [&s](const Context& c) { return Metrics(c, s.id, s.names, s.max_points); });
  metrics->add_option("ID", s.id, "Run id")->required();
  metrics->add_option("--name", s.names, "Only these series (e.g. val/loss); repeatable")
      ->delimiter(',')
      ->allow_extra_args(false);
  metrics->add_option("--max_points", s.max_points,
                      "Points per series (0: the coordinator's default, 500)");

  CLI::App* query = Leaf(&app, "query", "Read-only SQL on the results database", action,
                         [&s](const Context& c) { return Query(c, s.sql, s.max_rows); });
  query->add_option("SQL", s.sql, "A SELECT or WITH statement")->required();
  query->add_option("--max_rows", s.max_rows, "Row limit (0: the coordinator's cap, 10000)");
}

void AddFitShow(CLI::App* fit, State& s, Action* action) {
  CLI::App* show = Leaf(fit, "show", "The latest fit: parameters, R², RMSE, CV", action,
                        [&s](const Context& c) { return FitShow(c, s.id, s.study); });
  show->add_option("SWEEP", s.id, "Sweep id (or --study)");
  show->add_option("--study", s.study, "The study's fit instead of a sweep's");
}

void AddFitPredict(CLI::App* fit, PredictOptions& p, Action* action) {
  CLI::App* predict = Leaf(fit, "predict", "Predicted Δ and loss (every C × L × K × A)", action,
                           [&p](const Context& c) { return FitPredict(c, p); });
  predict->add_option("SWEEP", p.sweep_id, "Sweep id (or --study)");
  predict->add_option("--study", p.study, "Under the study's fit instead of a sweep's");
  predict->add_option("--C", p.flops, "Training FLOPs, e.g. 1e20")
      ->required()
      ->delimiter(',')
      ->allow_extra_args(false);
  predict->add_option("--L", p.seq_lens, "Context lengths")
      ->required()
      ->delimiter(',')
      ->allow_extra_args(false);
  predict->add_option("--backbone", p.backbone, "Backbone preset, e.g. 556M")->required();
  predict->add_option("--K", p.ks, "Token sparsities")
      ->required()
      ->delimiter(',')
      ->allow_extra_args(false);
  predict->add_option("--A", p.as, "Anchor strides (default 1)")
      ->delimiter(',')
      ->allow_extra_args(false);
}

void AddFitRecommend(CLI::App* fit, RecommendOptions& r, Action* action) {
  CLI::App* recommend = Leaf(fit, "recommend", "The best (K, A) for (C, L, backbone)", action,
                             [&r](const Context& c) { return FitRecommend(c, r); });
  recommend->add_option("SWEEP", r.sweep_id, "Sweep id (or --study)");
  recommend->add_option("--study", r.study, "Under the study's fit instead of a sweep's");
  recommend->add_option("--C", r.flops, "Training FLOPs, e.g. 1e20")->required();
  recommend->add_option("--L", r.seq_len, "Context length")->required();
  recommend->add_option("--backbone", r.backbone, "Backbone preset, e.g. 556M")->required();
  recommend->add_option("--max_params", r.max_params, "Cap on total parameters, e.g. 3B");
  recommend->add_option("--ks", r.ks, "Candidate K (default 1..32)")
      ->delimiter(',')
      ->allow_extra_args(false);
  recommend->add_option("--as", r.as, "Candidate A (default 0.5,1,2,3,4,5)")
      ->delimiter(',')
      ->allow_extra_args(false);
  recommend->add_option("--top", r.top, "Candidates shown");
}

void AddFitPropose(CLI::App* fit, ProposeOptions& pr, Action* action) {
  CLI::App* propose = Leaf(fit, "propose", "The next runs that tell most about (K*, A*) per FLOP",
                           action, [&pr](const Context& c) { return FitPropose(c, pr); });
  propose->add_option("SWEEP", pr.sweep_id, "Sweep id (with --study: the member taking the runs)")
      ->required();
  propose->add_option("--study", pr.study, "Under the study's fit (every member's runs)");
  propose->add_option("--target", pr.targets,
                      "C:L:BACKBONE, repeatable (default: the sweep's adaptive targets)");
  propose->add_option("--compute_left", pr.compute_left, "Training FLOPs still to spend");
  propose->add_option("--count", pr.count, "Proposals shown (and queued with --submit)");
  propose->add_option("--bootstrap", pr.bootstrap_samples, "Ensemble size (default 32)");
  propose->add_option("--seed", pr.seed, "Ensemble seed");
  propose->add_flag("--submit", pr.submit, "Queue the proposals as runs of the sweep");
}

void AddFitCommands(CLI::App& app, State& s, Action* action) {
  CLI::App* fit =
      app.add_subcommand("fit", "The scaling-law fit (paper Eq. 14) of a sweep or a study");
  fit->require_subcommand(1);
  AddFitShow(fit, s, action);
  AddFitPredict(fit, s.predict, action);
  AddFitRecommend(fit, s.recommend, action);
  AddFitPropose(fit, s.propose, action);
}

void AddStudyCommands(CLI::App& app, State& s, Action* action) {
  CLI::App* study = app.add_subcommand("study", "Studies: one fit over several sweeps (B.4 roles)");
  study->require_subcommand(1);
  StudyCreateOptions& o = s.study_create;
  CLI::App* create = Leaf(study, "create", "Create a study from --member flags or a StudySpec",
                          action, [&o](const Context& c) { return StudyCreate(c, o); });
  create->add_option("NAME", o.name, "Study name (default: the file's)");
  create->add_option("-f,--file", o.file,
                     "StudySpec file (.textpb/.txtpb/.pbtxt or .json; - reads standard input)");
  create
      ->add_option("--member", o.members,
                   "ROLE=SWEEP, ROLE kxl|nact|axk|design, SWEEP an id or name; repeatable")
      ->allow_extra_args(false);
  create->add_option("--description", o.description, "Free text");
  create->add_option("--seed", o.seed,
                     "DE / bootstrap seed of the study's fit (default: the file's, else the "
                     "member sweeps' fit.seed)");
  create->add_option("--bootstrap_samples", o.bootstrap_samples,
                     "Bootstrap refits, 0 = none (default: the file's, else the member sweeps' "
                     "fit.bootstrap_samples)");
  create->add_flag("--dry_run", o.dry_run,
                   "Validate and count the in-range observations only; store and cancel nothing");
  Leaf(study, "list", "List studies, newest first", action,
       [](const Context& c) { return StudyList(c); });
  CLI::App* show = Leaf(study, "show", "A study and its member sweeps", action,
                        [&s](const Context& c) { return StudyShow(c, s.study); });
  show->add_option("NAME", s.study, "Study name")->required();
}

void AddPlanCommand(CLI::App& app, State& s, Action* action) {
  PlanOptions& p = s.plan;
  CLI::App* plan = Leaf(&app, "plan", "Layer plan, parameters and FLOPs (offline)", action,
                        [&p](const Context& c) { return Plan(c, p); });
  plan->add_option("--backbone", p.backbone, "Preset: 165M 298M 556M 936M 1.65B cpu-d64 ...")
      ->capture_default_str();
  plan->add_option("--arch", p.arch, "dense|mod|xmod|moe|routed_ffn|selected_q_full_kv")
      ->capture_default_str();
  plan->add_option("--K", p.k, "Token sparsity K")->capture_default_str();
  plan->add_option("--A", p.a, "Anchor stride A")->capture_default_str();
  plan->add_option("--n0", p.n0, "Dense prefix N0 (default 4 for xmod, 1 for mod)");
  plan->add_option("--L", p.seq_len, "Context length L")->capture_default_str();
  plan->add_option("--experts", p.experts, "MoE experts active:total+shared, e.g. 6:64+2");
  plan->add_option("--expert_dim", p.expert_dim, "MoE expert width d_e (default: FLOP-matched)");
}

void AddUsageCommand(CLI::App& app, State& s, Action* action) {
  CLI::App* usage =
      Leaf(&app, "usage", "Per user: slots in use, quota, share, GPU-/core-hours in a window",
           action, [&s](const Context& c) { return Usage(c, s.usage_window); });
  usage->add_option("--window", s.usage_window, "The window ending now: 24h, 90m, 168h ...")
      ->capture_default_str();
}

void AddEventsCommand(CLI::App& app, State& s, Action* action) {
  EventsOptions& e = s.events;
  CLI::App* events = Leaf(&app, "events", "The event log: who changed what (newest first)", action,
                          [&s](const Context& c) { return Events(c, s.events); });
  events->add_option("--sweep", e.sweep_id, "A sweep's events and its runs'");
  events->add_option("--run", e.run_id, "A run's events");
  events
      ->add_option("--actor", s.events_actor,
                   "Only changes made by this credential (\"\" = the anonymous caller)")
      ->each([&e](const std::string& name) { e.actor = name; });
  events->add_option("--limit", e.limit, "Events per page (0 = 100, at most 1000)");
  events->add_option("--before_id", e.before_id, "The page before this event id");
}

void AddAdminCommands(CLI::App& app, State& s, Action* action) {
  CLI::App* admin = app.add_subcommand("admin", "An operator's commands (admin credential)");
  admin->require_subcommand(1);
  CLI::App* backup =
      Leaf(admin, "backup", "Online backup of the coordinator's database into FILE (checked)",
           action, [&s](const Context& c) { return AdminBackup(c, s.file); });
  backup->add_option("FILE", s.file, "The backup file to write (must not exist)")->required();
}

void AddReportCommand(CLI::App& app, State& s, Action* action) {
  ReportOptions& r = s.report;
  CLI::App* report =
      Leaf(&app, "report",
           "Figure 2-style plots (PNG, SVG) and report.md of the latest fit; a pilot's Fig. 4",
           action, [&r](const Context& c) { return Report(c, r); });
  report->add_option("SWEEP", r.sweep_id, "Sweep id (or --study)");
  report->add_option("--study", r.study, "The study's fit instead of a sweep's");
  report->add_option("--output", r.output, "Directory to write (created if missing)")->required();
}

void AddPilotCommands(CLI::App& app, State& s, Action* action) {
  CLI::App* pilot = app.add_subcommand("pilot", "The B.3 pilot: X-MoD picks per MoE baseline");
  pilot->require_subcommand(1);
  PilotSelectOptions& o = s.pilot;
  CLI::App* select =
      Leaf(pilot, "select",
           "Per MoE, the lowest measured-loss X-MoD at its N_act and K within its N (Fig. 4)",
           action, [&o](const Context& c) { return PilotSelect(c, o); });
  select->add_option("SWEEP", o.sweep_id, "The pilot sweep's id")->required();
  select->add_option("--figure_dir", o.figure_dir,
                     "Also write the Fig. 4-style pilot_selection.png and .svg here");
}

// The whole command line: global options and every subcommand, bound to `s` and `action`.
void DefineXmodctl(CLI::App& app, State& s, Action* action) {
  app.fallthrough();  // global options may follow the subcommand
  AddVersionFlag(app, "xmodctl");
  app.require_subcommand(1);
  FromEnv("XMOD_ADDR", &s.globals.addr);
  FromEnv("XMOD_TOKEN_FILE", &s.globals.token_file);
  FromEnv("XMOD_TLS_CA", &s.globals.tls.ca_file);
  FromEnv("XMOD_TLS_CERT", &s.globals.tls.cert_file);
  FromEnv("XMOD_TLS_KEY", &s.globals.tls.key_file);
  app.add_option("--addr", s.globals.addr, "Coordinator host:port (env XMOD_ADDR)")
      ->capture_default_str();
  app.add_option("--token_file", s.globals.token_file,
                 "File holding the bearer token (env XMOD_TOKEN_FILE; else env XMOD_TOKEN "
                 "holds the token itself)");
  app.add_option("--token", s.globals.token_flag,
                 "Removed: a token on the command line is visible in ps; use --token_file")
      ->group("");  // hidden from help and completion
  app.add_flag("--tls", s.globals.tls.enabled, "Use TLS with the system's root CAs");
  app.add_option("--tls_ca", s.globals.tls.ca_file,
                 "PEM CA to verify the coordinator with; implies --tls (env XMOD_TLS_CA)");
  app.add_option("--tls_cert", s.globals.tls.cert_file,
                 "PEM client certificate for mutual TLS (env XMOD_TLS_CERT)");
  app.add_option("--tls_key", s.globals.tls.key_file, "PEM key of --tls_cert (env XMOD_TLS_KEY)");
  app.add_option("--output,-o", s.globals.output, "table, json or csv")->capture_default_str();
  app.add_option("--timeout", s.globals.timeout_s, "Seconds to wait for each call")
      ->capture_default_str();
  AddSweepCommands(app, s, action);
  AddRunCommands(app, s, action);
  AddFitCommands(app, s, action);
  AddStudyCommands(app, s, action);
  AddPlanCommand(app, s, action);
  AddReportCommand(app, s, action);
  AddPilotCommands(app, s, action);
  AddUsageCommand(app, s, action);
  AddEventsCommand(app, s, action);
  AddAdminCommands(app, s, action);
  AddCompletionCommand(app, action);
}

CLI::App NewXmodctlApp() {
  return CLI::App{"xmodctl: the xmod command line (sweeps, runs, metrics, queries, fits, plans)",
                  "xmodctl"};
}

}  // namespace

CommandNode XmodctlCommandTree() {
  CLI::App app = NewXmodctlApp();
  State s;
  Action action;
  DefineXmodctl(app, s, &action);
  return CommandTreeOf(app);
}

int ExitCode(const absl::Status& status) {
  if (status.ok()) return 0;
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

int RunXmodctl(const std::vector<std::string>& args, const Io& io) {
  CLI::App app = NewXmodctlApp();
  State s;
  Action action;
  DefineXmodctl(app, s, &action);

  std::vector<std::string> reversed =
      ReversedForCli11(std::vector<std::string>(args.begin() + (args.empty() ? 0 : 1), args.end()));
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return ExitForParseError(app, e, *io.out, *io.err);
  }
  if (!s.globals.token_flag.empty()) {
    *io.err << "xmodctl: --token is no longer accepted (a token on the command line is visible "
               "in ps); put it in a file and pass --token_file, or set XMOD_TOKEN\n";
    return 2;
  }
  absl::StatusOr<std::string> token = ReadToken(s.globals.token_file, "XMOD_TOKEN");
  if (!token.ok()) {
    *io.err << "xmodctl: --token_file: " << token.status().message() << "\n";
    return 2;
  }
  Context ctx;
  ctx.client = ClientOptions{s.globals.addr, *token, s.globals.tls, s.globals.timeout_s};
  ctx.out = io.out;
  ctx.out_is_tty = io.out_is_tty;
  ctx.tty_columns = io.tty_columns;
  ctx.tty_rows = io.tty_rows;
  ctx.tty_size = io.tty_size;
  ctx.in = io.in;
  auto format = ParseOutputFormat(s.globals.output);
  absl::Status status = format.status();
  if (status.ok()) {
    ctx.format = *format;
    status = action ? action(ctx) : absl::InvalidArgumentError("no command given");
  }
  io.out->flush();
  if (!status.ok())
    *io.err << "xmodctl: " << absl::StrReplaceAll(status.message(), {{"\n", " "}}) << "\n";
  return ExitCode(status);
}

}  // namespace xmod::cli
