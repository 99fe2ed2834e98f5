// xmodctl sweep submit | list | show | cancel | retry | watch (see commands.h).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/render.h"
#include "cli/spec_file.h"
#include "cli/watch.h"
#include "common/proto_json.h"

namespace xmod::cli {
namespace {

using xmod::v1::Coordinator;

// Events `sweep show` lists, newest first (`xmodctl events --sweep ID` pages through the rest).
constexpr int kSweepShowEvents = 20;

// Reconnects of `sweep watch` after the coordinator went away (backoff 0.25 s .. 4 s,
// about a minute in all).
constexpr int kWatchReconnects = 18;

std::vector<xmod::v1::Run> Runs(const google::protobuf::RepeatedPtrField<xmod::v1::Run>& runs) {
  return {runs.begin(), runs.end()};
}

// The observations of the law the sweep will contribute to its fit (fitter/observations.h):
// X-MoD runs with K >= 2 that the FitPlan does not hold out. Dense references (DENSE, X-MoD
// K = 1), other architectures and held-out runs do not count.
int InRangeObservations(const google::protobuf::RepeatedPtrField<xmod::v1::Run>& runs) {
  return static_cast<int>(std::count_if(runs.begin(), runs.end(), [](const xmod::v1::Run& r) {
    return r.spec().model().arch() == xmod::v1::XMOD && r.spec().model().k() >= 2 && !r.held_out();
  }));
}

// Where `sweep watch` stands, across reconnects.
struct WatchState {
  WatchView view;
  bool connected_once = false;
  int retries = 0;
};

// Shows one event: as a JSON line, else in the redrawn table or the line log.
absl::Status ShowEvent(const Context& ctx, const xmod::v1::WatchSweepEvent& event,
                       const WatchView& view, const std::vector<int64_t>& changed,
                       WatchPrinter& printer) {
  if (ctx.format == OutputFormat::kJson) {
    // JSON lines: one WatchSweepEvent a line, flushed as it arrives.
    absl::StatusOr<std::string> line = ProtoJson(event, JsonLayout::kLine);
    if (!line.ok()) return line.status();
    *ctx.out << *line << std::endl;
    return absl::OkStatus();
  }
  if (int columns = 0, rows = 0; ctx.tty_size && ctx.tty_size(&columns, &rows)) {
    printer.Resize(columns, rows);
  }
  printer.Print(view, changed, event.snapshot());
  return absl::OkStatus();
}

// Reads one WatchSweep stream until it breaks or the sweep ends, showing each event; returns
// how the stream finished, or why an event could not be shown (the stream cancelled).
absl::StatusOr<grpc::Status> ReadWatchStream(CoordinatorClient& client, const Context& ctx,
                                             const xmod::v1::WatchSweepRequest& request,
                                             WatchState& state, WatchPrinter& printer) {
  // No deadline: a sweep runs for as long as it takes.
  auto context = client.NewContext(/*with_deadline=*/false);
  auto reader = client.stub().WatchSweep(context.get(), request);
  xmod::v1::WatchSweepEvent event;
  while (reader->Read(&event)) {
    state.connected_once = true;
    state.retries = 0;
    std::vector<int64_t> changed = state.view.Apply(event);
    if (absl::Status shown = ShowEvent(ctx, event, state.view, changed, printer); !shown.ok()) {
      context->TryCancel();
      (void)reader->Finish();
      return shown;
    }
    if (state.view.Ended()) {
      context->TryCancel();
      break;
    }
  }
  return reader->Finish();
}

// A coordinator restart breaks the stream; once it served us, wait for it to come back
// (a reconnect starts with a fresh snapshot). False: give up.
bool WaitToReconnect(const grpc::Status& status, WatchState& state) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE || !state.connected_once ||
      state.retries >= kWatchReconnects) {
    return false;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(250 << std::min(state.retries, 4)));
  ++state.retries;
  return true;
}

// OK when the watched sweep is done, else ABORTED naming its failed and cancelled runs.
absl::Status WatchOutcome(int64_t sweep_id, const WatchView& view) {
  if (view.sweep().state() == xmod::v1::SWEEP_DONE) return absl::OkStatus();
  std::vector<std::string> bad;
  for (const auto& [id, run] : view.runs()) {
    if (run.state() == xmod::v1::FAILED || run.state() == xmod::v1::CANCELLED) {
      bad.push_back(absl::StrCat(run.name(), " (", RunStateName(run.state()), ")"));
    }
  }
  std::string listed =
      bad.empty() ? "no run listed"
                  : absl::StrJoin(bad.begin(), bad.begin() + std::min<size_t>(bad.size(), 4), ", ");
  if (bad.size() > 4) absl::StrAppend(&listed, " and ", bad.size() - 4, " more");
  return absl::AbortedError(absl::StrCat("sweep ", sweep_id, " ended ",
                                         SweepStateName(view.sweep().state()), ": ", listed));
}

}  // namespace

absl::Status SweepSubmit(const Context& ctx, const std::string& file, bool dry_run) {
  auto spec = LoadSweepSpec(file, ctx.in);
  if (!spec.ok()) return spec.status();
  AbsolutizeDataGlobs(std::filesystem::current_path().string(), &*spec);
  xmod::v1::SubmitSweepRequest request;
  *request.mutable_spec() = *spec;
  request.set_dry_run(dry_run);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto response = client->Call(&Coordinator::Stub::SubmitSweep, request);
  if (!response.ok()) return response.status();
  std::ostream& out = *ctx.out;
  if (ctx.format == OutputFormat::kJson) {
    return PrintJson(out, *response);
  }
  Table runs = PlannedRunsTable(Runs(response->runs()));
  if (ctx.format == OutputFormat::kTable) {
    runs.title = dry_run ? absl::StrCat("Dry run: sweep \"", spec->name(), "\" expands to ",
                                        response->runs_size(), " runs, ",
                                        InRangeObservations(response->runs()),
                                        " in-range X-MoD observations (nothing stored)")
                         : absl::StrCat("Submitted sweep ", response->sweep_id(), " (\"",
                                        spec->name(), "\") with ", response->runs_size(), " runs");
  }
  out << Render(runs, ctx.format);
  // The forecast goes with the table only: CSV stays one table (JSON carries it whole).
  if (dry_run && ctx.format == OutputFormat::kTable) {
    out << "\n" << Render(ForecastTable(response->forecast()), ctx.format);
  }
  return absl::OkStatus();
}

absl::Status SweepList(const Context& ctx, int limit) {
  xmod::v1::ListSweepsRequest request;
  request.set_limit(limit);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto response = client->Call(&Coordinator::Stub::ListSweeps, request);
  if (!response.ok()) return response.status();
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, *response);
  *ctx.out << Render(SweepsTable({response->sweeps().begin(), response->sweeps().end()}),
                     ctx.format);
  return absl::OkStatus();
}

absl::Status SweepShow(const Context& ctx, int64_t sweep_id) {
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  xmod::v1::GetSweepRequest get;
  get.set_sweep_id(sweep_id);
  auto sweep = client->Call(&Coordinator::Stub::GetSweep, get);
  if (!sweep.ok()) return sweep.status();
  if (ctx.format == OutputFormat::kJson) {
    return PrintJson(*ctx.out, *sweep);
  }
  xmod::v1::ListRunsRequest list;
  list.set_sweep_id(sweep_id);
  auto runs = client->Call(&Coordinator::Stub::ListRuns, list);
  if (!runs.ok()) return runs.status();
  Table runs_table = RunsTable(Runs(runs->runs()));
  runs_table.title = "Runs";
  std::vector<Table> sections = {SweepSummaryTable(*sweep), runs_table};
  // An adaptive sweep's latest decision (docs/adaptive-design.md), and how many came before.
  xmod::v1::ListDecisionsRequest decisions_request;
  decisions_request.set_sweep_id(sweep_id);
  decisions_request.set_limit(1000);
  auto decisions = client->Call(&Coordinator::Stub::ListDecisions, decisions_request);
  if (!decisions.ok()) return decisions.status();
  if (decisions->decisions_size() > 0) {
    std::vector<Table> latest = DecisionTables(decisions->decisions(0));
    latest[0].title = absl::StrCat("Latest of ", decisions->decisions_size(), " design decisions (",
                                   latest[0].title, ")");
    sections.insert(sections.end(), latest.begin(), latest.end());
  }
  absl::StatusOr<Table> events = RecentEventsTable(*client, sweep_id, 0, kSweepShowEvents);
  if (!events.ok()) return events.status();
  sections.push_back(*std::move(events));
  *ctx.out << RenderSections(sections, ctx.format);
  return absl::OkStatus();
}

absl::Status SweepCancel(const Context& ctx, int64_t sweep_id) {
  xmod::v1::CancelSweepRequest request;
  request.set_sweep_id(sweep_id);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto sweep = client->Call(&Coordinator::Stub::CancelSweep, request);
  if (!sweep.ok()) return sweep.status();
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, *sweep);
  *ctx.out << Render(SweepsTable({*sweep}), ctx.format);
  return absl::OkStatus();
}

absl::Status SweepRetry(const Context& ctx, int64_t sweep_id) {
  xmod::v1::RetryFailedRequest request;
  request.set_sweep_id(sweep_id);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto response = client->Call(&Coordinator::Stub::RetryFailed, request);
  if (!response.ok()) return response.status();
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, *response);
  Table t;
  t.title = absl::StrCat("Requeued ", response->run_ids_size(), " failed runs of sweep ", sweep_id);
  t.columns = {"run_id"};
  for (int64_t id : response->run_ids()) t.AddRow({Cell::Int(id)});
  *ctx.out << Render(t, ctx.format);
  return absl::OkStatus();
}

absl::Status SweepWatch(const Context& ctx, int64_t sweep_id, bool no_redraw) {
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  xmod::v1::WatchSweepRequest request;
  request.set_sweep_id(sweep_id);
  WatchState state;
  WatchPrinter printer(ctx.out, ctx.out_is_tty && !no_redraw, ctx.tty_columns, ctx.tty_rows);
  while (true) {
    absl::StatusOr<grpc::Status> status = ReadWatchStream(*client, ctx, request, state, printer);
    if (!status.ok()) return status.status();
    if (state.view.Ended()) break;
    if (WaitToReconnect(*status, state)) continue;
    if (!status->ok()) return client->Error(*status);
    return absl::UnavailableError(
        absl::StrCat("the watch stream of sweep ", sweep_id, " ended before the sweep did"));
  }
  if (ctx.format != OutputFormat::kJson) printer.Finish(state.view);
  return WatchOutcome(sweep_id, state.view);
}

}  // namespace xmod::cli
