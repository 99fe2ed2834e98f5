// xmodctl events: the coordinator's event log — every change with the credential that made it
// (ListEvents; docs/security.md, "Who did what") — and the event sections of `run show`,
// `sweep show` and `usage`.
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/render.h"

namespace xmod::cli {

using xmod::v1::Coordinator;

std::string ActorName(const xmod::v1::Event& event) {
  if (!event.has_actor()) return "coordinator";
  return event.actor().empty() ? "(anonymous)" : event.actor();
}

Table EventsTable(const std::string& title,
                  const google::protobuf::RepeatedPtrField<xmod::v1::Event>& events) {
  Table table;
  table.title = title;
  table.columns = {"time", "kind", "sweep", "run", "by", "text"};
  for (const xmod::v1::Event& e : events) {
    table.AddRow({Cell::Str(FormatUnixMs(e.time_unix_ms())), Cell::Str(e.kind()),
                  e.sweep_id() != 0 ? Cell::Int(e.sweep_id()) : Cell::Null(),
                  e.run_id() != 0 ? Cell::Int(e.run_id()) : Cell::Null(), Cell::Str(ActorName(e)),
                  Cell::Str(e.text())});
  }
  return table;
}

absl::StatusOr<Table> RecentEventsTable(CoordinatorClient& client, int64_t sweep_id, int64_t run_id,
                                        int limit) {
  xmod::v1::ListEventsRequest request;
  request.set_sweep_id(sweep_id);
  request.set_run_id(run_id);
  request.set_limit(limit);
  auto response = client.Call(&Coordinator::Stub::ListEvents, request);
  if (!response.ok()) return response.status();
  std::string title = absl::StrCat("Events, newest first (", response->events_size());
  if (response->next_before_id() != 0) {
    absl::StrAppend(
        &title, " newest; more: xmodctl events ",
        run_id != 0 ? absl::StrCat("--run ", run_id) : absl::StrCat("--sweep ", sweep_id),
        " --before_id ", response->next_before_id());
  }
  absl::StrAppend(&title, ")");
  return EventsTable(title, response->events());
}

absl::Status Events(const Context& ctx, const EventsOptions& options) {
  xmod::v1::ListEventsRequest request;
  request.set_sweep_id(options.sweep_id);
  request.set_run_id(options.run_id);
  if (options.actor.has_value()) request.set_actor(*options.actor);
  request.set_limit(options.limit);
  request.set_before_id(options.before_id);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto response = client->Call(&Coordinator::Stub::ListEvents, request);
  if (!response.ok()) return response.status();
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, *response);
  *ctx.out << Render(EventsTable("Events, newest first", response->events()), ctx.format);
  if (ctx.format == OutputFormat::kTable && response->next_before_id() != 0) {
    *ctx.out << "(next page: --before_id " << response->next_before_id() << ")\n";
  }
  return absl::OkStatus();
}

}  // namespace xmod::cli
