// See usage_queries.h.
#include "coordinator/api/usage_queries.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/field_path.h"
#include "coordinator/store/event_rows.h"
#include "coordinator/store/sharing_rows.h"

namespace xmod {
namespace {

// The newest changes GetUsage lists.
constexpr int kRecentChanges = 20;

// What the database says of the window [from_ms, now_ms].
struct UsageFacts {
  std::map<std::string, UsageRow> rows;         // by user
  std::map<std::string, ActorChanges> changes;  // by actor
  std::vector<xmod::v1::Event> recent_changes;  // newest first
};

absl::Status ReadUsageFacts(Db& db, int64_t from_ms, int64_t now_ms, UsageFacts* facts) {
  absl::StatusOr<std::map<std::string, UsageRow>> usage = LoadUsage(db, from_ms, now_ms);
  if (!usage.ok()) return usage.status();
  facts->rows = *std::move(usage);
  absl::StatusOr<std::map<std::string, ActorChanges>> made = CountChangesByActor(db, from_ms);
  if (!made.ok()) return made.status();
  facts->changes = *std::move(made);
  EventQuery newest;
  newest.since_ms = from_ms;
  newest.changes_only = true;
  newest.limit = kRecentChanges;
  absl::StatusOr<std::vector<xmod::v1::Event>> events = LoadEvents(db, newest);
  if (!events.ok()) return events.status();
  facts->recent_changes = *std::move(events);
  return absl::OkStatus();
}

// One user's line: slots against its quota, share, use, changes and ceilings.
void FillUserUsage(const std::string& name, const UsageRow& row, const ActorChanges& changes,
                   const scheduling::UserPolicy& user, double active_weight,
                   xmod::v1::UserUsage* u) {
  u->set_user(name);
  u->set_gpu_slots_in_use(row.gpu_slots_in_use);
  u->set_cpu_slots_in_use(row.cpu_slots_in_use);
  u->set_gpu_quota(user.gpu_slots.value_or(-1));
  u->set_cpu_quota(user.cpu_slots.value_or(-1));
  int borrowed = 0;
  if (user.gpu_slots) borrowed += std::max(0, row.gpu_slots_in_use - *user.gpu_slots);
  if (user.cpu_slots) borrowed += std::max(0, row.cpu_slots_in_use - *user.cpu_slots);
  u->set_borrowed_slots(borrowed);
  u->set_weight(user.weight);
  const bool active = row.queued_runs + row.running_runs > 0;
  u->set_share(active && active_weight > 0 ? user.weight / active_weight : 0);
  u->set_gpu_hours(row.gpu_hours);
  u->set_core_hours(row.core_hours);
  u->set_queued_runs(row.queued_runs);
  u->set_running_runs(row.running_runs);
  u->set_changes(changes.changes);
  u->set_changes_to_others_work(changes.to_others_work);
  u->set_max_priority(user.max_priority.value_or(-1));
  u->set_allow_non_preemptible(user.allow_non_preemptible);
}

}  // namespace

absl::StatusOr<xmod::v1::GetUsageResponse> GetUsage(Store& store,
                                                    const scheduling::SharingPolicy& policy,
                                                    const xmod::v1::GetUsageRequest& request,
                                                    int64_t now_ms) {
  if (request.window_ms() < 0 || request.window_ms() > kMaxUsageWindowMs) {
    return InvalidField("window_ms", absl::StrCat("must be in [0, ", kMaxUsageWindowMs,
                                                  "] (366 days), got ", request.window_ms()));
  }
  const int64_t window = request.window_ms() == 0 ? int64_t{24} * 3600 * 1000 : request.window_ms();
  UsageFacts facts;
  if (absl::Status s =
          store.Read([&](Db& db) { return ReadUsageFacts(db, now_ms - window, now_ms, &facts); });
      !s.ok()) {
    return s;
  }
  // Every user the policy names, and every credential that changed something, has a line.
  for (const auto& [name, user] : policy.users) facts.rows.try_emplace(name);
  for (const auto& [name, made] : facts.changes) facts.rows.try_emplace(name);
  double active_weight = 0;  // of the users with live runs
  for (const auto& [name, row] : facts.rows) {
    if (row.queued_runs + row.running_runs > 0) active_weight += policy.For(name).weight;
  }
  xmod::v1::GetUsageResponse response;
  response.set_window_ms(window);
  response.set_now_unix_ms(now_ms);
  for (const auto& [name, row] : facts.rows) {
    auto made = facts.changes.find(name);
    FillUserUsage(name, row, made == facts.changes.end() ? ActorChanges{} : made->second,
                  policy.For(name), active_weight, response.add_users());
  }
  for (xmod::v1::Event& event : facts.recent_changes) {
    *response.add_recent_changes() = std::move(event);
  }
  return response;
}

absl::Status AddRunSharing(Store& store, xmod::v1::GetRunResponse* response) {
  return store.Read([response](Db& db) {
    absl::StatusOr<RunSharingRow> row = LoadRunSharing(db, response->run().id());
    if (!row.ok()) return row.status();
    xmod::v1::RunSharing* sharing = response->mutable_sharing();
    sharing->set_submitter(row->submitter);
    sharing->set_preemptible(row->preemptible);
    for (const PreemptionRow& p : row->preemptions) {
      xmod::v1::Preemption* out = sharing->add_preemptions();
      out->set_time_unix_ms(p.time_ms);
      out->set_attempt(p.attempt);
      out->set_reason(p.reason);
    }
    return absl::OkStatus();
  });
}

}  // namespace xmod
