// xmodctl usage: per user credential, the slots in use, quota, fair share and the GPU-hours
// and core-hours used in a window (GetUsage; docs/operations.md, "Sharing a cluster"), and
// the sharing section of `xmodctl run show` (who a run belongs to, its preemptions).
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli/commands.h"
#include "cli/render.h"

namespace xmod::cli {
namespace {

using xmod::v1::Coordinator;

// "used/quota" with "-" for no quota.
Cell Slots(int in_use, int quota) {
  return Cell::Shown(absl::StrCat(in_use, "/", quota < 0 ? "-" : absl::StrCat(quota)));
}

}  // namespace

absl::Status Usage(const Context& ctx, const std::string& window) {
  absl::Duration duration;
  if (!absl::ParseDuration(window, &duration) || duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--window: '", window, "' is not a positive duration (e.g. 24h, 90m, 168h)"));
  }
  xmod::v1::GetUsageRequest request;
  request.set_window_ms(absl::ToInt64Milliseconds(duration));
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto response = client->Call(&Coordinator::Stub::GetUsage, request);
  if (!response.ok()) return response.status();
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, *response);
  Table table;
  table.title = absl::StrCat("Usage over the last ",
                             FormatDuration(static_cast<double>(response->window_ms()) / 1000));
  table.columns = {"user",    "gpu slots",  "cpu slots", "borrowed",       "weight",
                   "share",   "queued",     "running",   "gpu-hours",      "core-hours",
                   "changes", "to others'", "max prio",  "non-preemptible"};
  for (const xmod::v1::UserUsage& u : response->users()) {
    table.AddRow({Cell::Str(u.user().empty() ? "(anonymous)" : u.user()),
                  Slots(u.gpu_slots_in_use(), u.gpu_quota()),
                  Slots(u.cpu_slots_in_use(), u.cpu_quota()), Cell::Int(u.borrowed_slots()),
                  Cell::Num(u.weight()), Cell::Shown(FormatPercent(u.share())),
                  Cell::Int(u.queued_runs()), Cell::Int(u.running_runs()), Cell::Num(u.gpu_hours()),
                  Cell::Num(u.core_hours()), Cell::Int(u.changes()),
                  Cell::Int(u.changes_to_others_work()),
                  u.max_priority() < 0 ? Cell::Null() : Cell::Int(u.max_priority()),
                  Cell::Str(u.allow_non_preemptible() ? "allowed" : "no")});
  }
  const Table changes =
      EventsTable(absl::StrCat("Recent changes (the newest ", response->recent_changes_size(), ")"),
                  response->recent_changes());
  *ctx.out << RenderSections({table, changes}, ctx.format);
  return absl::OkStatus();
}

Table RunSharingTable(const xmod::v1::GetRunResponse& response) {
  const xmod::v1::RunSharing& sharing = response.sharing();
  Table table;
  table.title = absl::StrCat("Sharing: user ",
                             sharing.submitter().empty() ? "(anonymous)" : sharing.submitter(),
                             sharing.preemptible() ? ", preemptible" : ", not preemptible");
  table.columns = {"preempted at", "attempt", "reason"};
  for (const xmod::v1::Preemption& p : sharing.preemptions()) {
    table.AddRow(
        {Cell::Str(FormatUnixMs(p.time_unix_ms())), Cell::Int(p.attempt()), Cell::Str(p.reason())});
  }
  return table;
}

}  // namespace xmod::cli
