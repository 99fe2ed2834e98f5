// xmodctl runs list | run show | run resume | run cancel | metrics | query (see commands.h).
#include <iterator>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/render.h"
#include "trainer_contract/series.h"

namespace xmod::cli {
namespace {

using xmod::v1::Coordinator;

// Events `run show` lists, newest first (`xmodctl events --run ID` pages through the rest).
constexpr int kRunShowEvents = 50;

absl::Status PrintRun(const Context& ctx, const xmod::v1::Run& run) {
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, run);
  *ctx.out << Render(RunsTable({run}), ctx.format);
  return absl::OkStatus();
}

// The zero-shot results of a run whose spec lists training.eval_tasks: one row a task from
// its eval/<task>/* metrics (the latest point of each; "-" until the run reports them, and
// for a standard error lm-evaluation-harness reports as N/A), each metric followed by its
// standard error as the harness computes it (model/eval/stderr.h).
absl::StatusOr<Table> EvalTable(CoordinatorClient& client, const xmod::v1::Run& run) {
  Table t;
  t.title =
      "Zero-shot evaluation (*_stderr: standard errors as lm-evaluation-harness computes them)";
  static constexpr const char* kFields[] = {
      "n", "acc", "acc_stderr", "acc_norm", "acc_norm_stderr", "ppl", "ppl_stderr"};
  t.columns = {"task"};
  t.columns.insert(t.columns.end(), std::begin(kFields), std::end(kFields));
  const auto& tasks = run.spec().training().eval_tasks();
  xmod::v1::GetMetricsRequest request;
  request.set_run_id(run.id());
  request.set_max_points(100);
  for (const auto& task : tasks) {
    for (const char* field : kFields) {
      request.add_names(
          absl::StrCat(SeriesName(xmod::v1::SERIES_EVAL_PREFIX), task.task(), "/", field));
    }
  }
  auto response = client.Call(&Coordinator::Stub::GetMetrics, request);
  if (!response.ok()) return response.status();
  for (const auto& task : tasks) {
    std::vector<Cell> row = {Cell::Str(task.task())};
    for (const char* field : kFields) {
      const std::string name =
          absl::StrCat(SeriesName(xmod::v1::SERIES_EVAL_PREFIX), task.task(), "/", field);
      Cell cell = Cell::Null();
      for (const auto& series : response->series()) {
        if (series.name() != name || series.points().empty()) continue;
        const double value = series.points(series.points_size() - 1).value();
        cell = absl::string_view(field) == "n" ? Cell::Int(static_cast<int64_t>(value))
                                               : Cell::Num(value);
      }
      row.push_back(cell);
    }
    t.AddRow(std::move(row));
  }
  return t;
}

}  // namespace

absl::StatusOr<int> ParseRunState(const std::string& name) {
  xmod::v1::RunState state;
  if (xmod::v1::RunState_Parse(absl::AsciiStrToUpper(name), &state) &&
      state != xmod::v1::RUN_STATE_UNSPECIFIED) {
    return static_cast<int>(state);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--state: unknown run state \"", name,
                   "\" (queued, running, succeeded, failed or cancelled)"));
}

absl::StatusOr<xmod::v1::ListRunsRequest> RunsListRequest(const RunsListOptions& options) {
  xmod::v1::ListRunsRequest request;
  request.set_sweep_id(options.sweep_id);
  request.set_limit(options.limit);
  for (const auto& name : options.states) {
    auto state = ParseRunState(name);
    if (!state.ok()) return state.status();
    request.add_states(static_cast<xmod::v1::RunState>(*state));
  }
  xmod::v1::RunFilters* f = request.mutable_filters();
  for (const auto& name : options.archs) {
    xmod::v1::Architecture arch;
    if (!xmod::v1::Architecture_Parse(absl::AsciiStrToUpper(name), &arch) ||
        arch == xmod::v1::ARCHITECTURE_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat("--arch: unknown architecture \"", name, "\""));
    }
    f->add_archs(arch);
  }
  f->mutable_ks()->Add(options.ks.begin(), options.ks.end());
  f->mutable_as()->Add(options.as.begin(), options.as.end());
  f->mutable_seq_lens()->Add(options.seq_lens.begin(), options.seq_lens.end());
  for (const auto& b : options.backbones) f->add_backbones(b);
  for (const auto& l : options.labels) f->add_labels(l);
  f->set_name_contains(options.name_contains);
  xmod::v1::RunSortKey sort = xmod::v1::RUN_SORT_ID;
  if (!xmod::v1::RunSortKey_Parse(absl::StrCat("RUN_SORT_", absl::AsciiStrToUpper(options.sort)),
                                  &sort)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sort: unknown sort key \"", options.sort,
                     "\" (id, name, state, arch, k, a, seq_len, backbone, val_loss or created)"));
  }
  request.set_sort(sort);
  request.set_descending(options.descending);
  request.set_page_size(options.page_size);
  request.set_page_token(options.page_token);
  if (options.group == "replicates") {
    request.set_group(xmod::v1::RUN_GROUPING_REPLICATES);
  } else if (options.group != "none") {
    return absl::InvalidArgumentError("--group: must be none or replicates");
  }
  return request;
}

absl::Status RunsList(const Context& ctx, const RunsListOptions& options) {
  absl::StatusOr<xmod::v1::ListRunsRequest> request = RunsListRequest(options);
  if (!request.ok()) return request.status();
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto response = client->Call(&Coordinator::Stub::ListRuns, *request);
  if (!response.ok()) return response.status();
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, *response);
  if (request->group() == xmod::v1::RUN_GROUPING_REPLICATES) {
    *ctx.out << Render(RunGroupsTable({response->groups().begin(), response->groups().end()}),
                       ctx.format);
  } else {
    *ctx.out << Render(RunsTable({response->runs().begin(), response->runs().end()}), ctx.format);
  }
  if (ctx.format == OutputFormat::kTable && !response->next_page_token().empty()) {
    *ctx.out << "(" << response->total_size() << " in all; next page: --page_token "
             << response->next_page_token() << ")\n";
  }
  return absl::OkStatus();
}

absl::Status RunShow(const Context& ctx, int64_t run_id) {
  xmod::v1::GetRunRequest request;
  request.set_run_id(run_id);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto response = client->Call(&Coordinator::Stub::GetRun, request);
  if (!response.ok()) return response.status();
  if (ctx.format == OutputFormat::kJson) {
    return PrintJson(*ctx.out, *response);
  }
  std::vector<Table> sections = {RunSummaryTable(*response), AttemptsTable(*response),
                                 CheckpointsTable(*response), RunSharingTable(*response)};
  if (!response->run().spec().training().eval_tasks().empty()) {
    absl::StatusOr<Table> eval = EvalTable(*client, response->run());
    if (!eval.ok()) return eval.status();
    sections.push_back(*std::move(eval));
  }
  absl::StatusOr<Table> events = RecentEventsTable(*client, 0, run_id, kRunShowEvents);
  if (!events.ok()) return events.status();
  sections.push_back(*std::move(events));
  *ctx.out << RenderSections(sections, ctx.format);
  return absl::OkStatus();
}

absl::Status RunResume(const Context& ctx, int64_t run_id) {
  xmod::v1::ResumeRunRequest request;
  request.set_run_id(run_id);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto run = client->Call(&Coordinator::Stub::ResumeRun, request);
  if (!run.ok()) return run.status();
  return PrintRun(ctx, *run);
}

absl::Status RunCancel(const Context& ctx, int64_t run_id) {
  xmod::v1::CancelRunRequest request;
  request.set_run_id(run_id);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto run = client->Call(&Coordinator::Stub::CancelRun, request);
  if (!run.ok()) return run.status();
  return PrintRun(ctx, *run);
}

absl::Status Metrics(const Context& ctx, int64_t run_id, const std::vector<std::string>& names,
                     int max_points) {
  xmod::v1::GetMetricsRequest request;
  request.set_run_id(run_id);
  for (const auto& name : names) request.add_names(name);
  request.set_max_points(max_points);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto response = client->Call(&Coordinator::Stub::GetMetrics, request);
  if (!response.ok()) return response.status();
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, *response);
  *ctx.out << Render(MetricsTable(*response), ctx.format);
  return absl::OkStatus();
}

absl::Status Query(const Context& ctx, const std::string& sql, int max_rows) {
  xmod::v1::QueryRequest request;
  request.set_sql(sql);
  request.set_max_rows(max_rows);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto response = client->Call(&Coordinator::Stub::Query, request);
  if (!response.ok()) return response.status();
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, *response);
  Table table = QueryTable(*response);
  *ctx.out << Render(table, ctx.format);
  if (response->truncated() && ctx.format == OutputFormat::kTable) {
    *ctx.out << "(truncated at " << table.rows.size() << " rows; raise --max_rows)\n";
  }
  return absl::OkStatus();
}

}  // namespace xmod::cli
