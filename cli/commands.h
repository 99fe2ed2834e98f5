// The xmodctl commands as functions: each takes the parsed global options (Context) and its
// own arguments, talks to the coordinator (except Plan, which is offline), writes its result
// to ctx.out in ctx.format and returns a Status. The caller (app.cc) prints a failure as one
// line on stderr and maps it to the exit code. Thread-compatible.
#ifndef XMOD_CLI_COMMANDS_H_
#define XMOD_CLI_COMMANDS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/client.h"
#include "cli/format.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod::cli {

struct Context {
  ClientOptions client;
  OutputFormat format = OutputFormat::kTable;
  std::ostream* out = nullptr;
  bool out_is_tty = false;  // sweep watch redraws in place only on a terminal
  int tty_columns = 0;      // its width (0 = unknown); redrawn lines are cut to fit
  int tty_rows = 0;         // its height (0 = unknown); a taller table shows states
  std::function<bool(int* columns, int* rows)> tty_size;  // its size now (app.h Io)
  std::istream* in = nullptr;  // standard input, for a spec file given as "-"
};

// Sweeps.
absl::Status SweepSubmit(const Context& ctx, const std::string& file, bool dry_run);
absl::Status SweepList(const Context& ctx, int limit);
absl::Status SweepShow(const Context& ctx, int64_t sweep_id);
absl::Status SweepCancel(const Context& ctx, int64_t sweep_id);
absl::Status SweepRetry(const Context& ctx, int64_t sweep_id);
// Follows the WatchSweep stream until the sweep ends, redrawing a table in place when
// ctx.out is a terminal and `no_redraw` is false, else appending a line per change. OK when
// it ends done; ABORTED naming the failed (or cancelled) runs otherwise.
absl::Status SweepWatch(const Context& ctx, int64_t sweep_id, bool no_redraw = false);

// xmodctl runs list: the ListRuns query (run_pages.proto) from its flags. Enum values are
// names in any case without their prefixes ("running", "xmod", "val_loss", "replicates").
struct RunsListOptions {
  int64_t sweep_id = 0;
  std::vector<std::string> states;
  int limit = 0;
  std::vector<std::string> archs;
  std::vector<int> ks;
  std::vector<double> as;
  std::vector<int> seq_lens;
  std::vector<std::string> backbones;
  std::vector<std::string> labels;
  std::string name_contains;
  std::string sort = "id";
  bool descending = false;
  int page_size = 0;  // 0 = every entry
  std::string page_token;
  std::string group = "none";  // or "replicates"
};
// Prints one page of runs or of replicate groups; a table ends with the next page's
// --page_token when there is one.
absl::Status RunsList(const Context& ctx, const RunsListOptions& options);
// The ListRunsRequest of `options`; INVALID_ARGUMENT naming the flag for a value it cannot
// parse.
absl::StatusOr<xmod::v1::ListRunsRequest> RunsListRequest(const RunsListOptions& options);
absl::Status RunShow(const Context& ctx, int64_t run_id);
absl::Status RunResume(const Context& ctx, int64_t run_id);
absl::Status RunCancel(const Context& ctx, int64_t run_id);
absl::Status Metrics(const Context& ctx, int64_t run_id, const std::vector<std::string>& names,
                     int max_points);
absl::Status Query(const Context& ctx, const std::string& sql, int max_rows);

// A shared cluster (usage_commands.cc): per user, slots in use, quota, share and the
// GPU-hours and core-hours in the last `window` (a duration such as "24h"; INVALID_ARGUMENT
// naming --window otherwise).
absl::Status Usage(const Context& ctx, const std::string& window);
// The "Sharing" section of `run show`: the run's user, whether it is preemptible, and the
// PREEMPT orders its attempts were given.
Table RunSharingTable(const xmod::v1::GetRunResponse& response);

// An operator's online backup of the coordinator's database into `file`, which must not exist
// (admin_commands.cc; the Backup RPC, an admin credential).
absl::Status AdminBackup(const Context& ctx, const std::string& file);

// The event log (event_commands.cc; ListEvents): every change with the credential that made
// it, newest first, filtered by sweep, run or actor, `limit` per page (0 = 100), from
// `before_id` (0 = the newest).
struct EventsOptions {
  int64_t sweep_id = 0;
  int64_t run_id = 0;
  std::optional<std::string> actor;  // "" = the anonymous caller
  int limit = 0;
  int64_t before_id = 0;
};
absl::Status Events(const Context& ctx, const EventsOptions& options);
// Who made an event's change: its credential, "(anonymous)", or "coordinator".
std::string ActorName(const xmod::v1::Event& event);
// A table of events: time, kind, sweep, run, by (ActorName), text.
Table EventsTable(const std::string& title,
                  const google::protobuf::RepeatedPtrField<xmod::v1::Event>& events);
// The newest `limit` events of a sweep (run_id 0) or of a run, for `sweep show` and `run show`.
absl::StatusOr<Table> RecentEventsTable(CoordinatorClient& client, int64_t sweep_id, int64_t run_id,
                                        int limit);

// Scaling-law fit (paper Eq. 14) of a sweep, or of a study (`study`, its name, instead of
// sweep_id; exactly one of them, else INVALID_ARGUMENT naming --study).
struct PredictOptions {
  int64_t sweep_id = 0;
  std::string study;
  std::vector<double> flops;  // C values; every combination with L, K, A is predicted
  std::vector<int> seq_lens;
  std::string backbone;
  std::vector<int> ks;
  std::vector<double> as;
};
struct RecommendOptions {
  int64_t sweep_id = 0;
  std::string study;
  double flops = 0;
  int seq_len = 0;
  std::string backbone;
  std::string max_params;  // e.g. "2.64B"; empty = no cap
  std::vector<int> ks;     // empty = the server's default candidates
  std::vector<double> as;
  int top = 10;  // candidates shown
};
absl::Status FitShow(const Context& ctx, int64_t sweep_id, const std::string& study);

// Studies: one fit over several sweeps. A member is "ROLE=SWEEP" (role kxl, nact, axk or
// design; SWEEP an id or a sweep name); `file` is a StudySpec (text format or JSON) whose
// name, description and members the flags add to or override.
struct StudyCreateOptions {
  std::string file;
  std::string name;
  std::string description;
  std::vector<std::string> members;
  int64_t seed = -1;           // -1 = the file's, else the member sweeps' (coordinator)
  int bootstrap_samples = -1;  // -1 = the file's, else the member sweeps' (coordinator)
  bool dry_run = false;        // validate, resolve and count only
};
absl::Status StudyCreate(const Context& ctx, const StudyCreateOptions& options);
absl::Status StudyList(const Context& ctx);
absl::Status StudyShow(const Context& ctx, const std::string& name);
absl::Status FitPredict(const Context& ctx, const PredictOptions& options);

// Law-guided design (docs/adaptive-design.md): the ranked next runs for a sweep's targets
// (ProposeRuns); `targets` are "C:L:BACKBONE" (empty = the sweep's AdaptiveSpec targets).
struct ProposeOptions {
  int64_t sweep_id = 0;
  std::string study;  // under the study's fit; SWEEP is then the member taking the runs
  std::vector<std::string> targets;
  std::string compute_left;  // training FLOPs still to spend, e.g. "2e12"; empty = no limit
  int count = 5;
  int bootstrap_samples = 0;  // 0 = the sweep's AdaptiveSpec's, else 32
  uint64_t seed = 0;
  bool submit = false;  // queue the proposals as runs of the sweep
};
absl::Status FitPropose(const Context& ctx, const ProposeOptions& options);
// "5e11:256:cpu-d96" -> DesignTarget; INVALID_ARGUMENT naming --target otherwise.
absl::StatusOr<xmod::v1::DesignTarget> ParseDesignTarget(absl::string_view text);
// The summary, recommendation and proposal tables of one decision.
std::vector<Table> DecisionTables(const xmod::v1::DesignDecision& decision);
absl::Status FitRecommend(const Context& ctx, const RecommendOptions& options);

// The Figure 2-style plots and report.md of the latest fit of a sweep or study (exactly one,
// else INVALID_ARGUMENT naming --study), written to `output` (cli/report/report.h); for a
// sweep that SelectPilot answers, also its Fig. 4-style pilot_selection.png and .svg
// (cli/report/pilot_figure.h), alone when the sweep has no fit. Prints each file written and
// each figure skipped. FAILED_PRECONDITION when there is no fit yet (and no pilot selection)
// or the fit carries no observations; UNAVAILABLE naming the path when `output` cannot be
// written.
struct ReportOptions {
  int64_t sweep_id = 0;
  std::string study;
  std::string output;
};
absl::Status Report(const Context& ctx, const ReportOptions& options);

// The B.3 pilot pick by measured loss (SelectPilot, proto/xmod/v1/pilot.proto): per MoE
// configuration of the sweep, the lowest-loss X-MoD at its N_act and nominal K within its
// total-parameter budget, and the table of Fig. 4's configurations. With `figure_dir`, also
// the Fig. 4-style figure there (cli/report/pilot_figure.h), each file written named.
struct PilotSelectOptions {
  int64_t sweep_id = 0;
  std::string figure_dir;  // empty = no figure
};
absl::Status PilotSelect(const Context& ctx, const PilotSelectOptions& options);

// Offline layer plan and accounting (paper Table 6).
struct PlanOptions {
  std::string backbone = "556M";
  std::string arch = "xmod";
  int k = 8;
  double a = 4;
  int n0 = -1;  // -1 = the architecture's default
  int seq_len = 32768;
  std::string experts;  // MoE "6:64+2"
  int expert_dim = 0;
};
absl::Status Plan(const Context& ctx, const PlanOptions& options);

// Parses a run state name ("running", "FAILED"); INVALID_ARGUMENT naming --state otherwise.
absl::StatusOr<int> ParseRunState(const std::string& name);

}  // namespace xmod::cli

#endif  // XMOD_CLI_COMMANDS_H_
