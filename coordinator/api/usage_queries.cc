// See usage_queries.h.
#include "coordinator/api/usage_queries.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/field_path.h"
#include "coordinator/store/sharing_rows.h"

namespace xmod {

absl::StatusOr<xmod::v1::GetUsageResponse> GetUsage(Store& store,
                                                    const scheduling::SharingPolicy& policy,
                                                    const xmod::v1::GetUsageRequest& request,
                                                    int64_t now_ms) {
  if (request.window_ms() < 0 || request.window_ms() > kMaxUsageWindowMs) {
    return InvalidField("window_ms", absl::StrCat("must be in [0, ", kMaxUsageWindowMs,
                                                  "] (366 days), got ", request.window_ms()));
  }
  const int64_t window = request.window_ms() == 0 ? int64_t{24} * 3600 * 1000 : request.window_ms();
  std::map<std::string, UsageRow> rows;
  if (absl::Status s = store.Read([&](Db& db) {
        absl::StatusOr<std::map<std::string, UsageRow>> usage =
            LoadUsage(db, now_ms - window, now_ms);
        if (!usage.ok()) return usage.status();
        rows = *std::move(usage);
        return absl::OkStatus();
      });
      !s.ok()) {
    return s;
  }
  for (const auto& [name, user] : policy.users) rows.try_emplace(name);
  double active_weight = 0;  // of the users with live runs
  for (const auto& [name, row] : rows) {
    if (row.queued_runs + row.running_runs > 0) active_weight += policy.For(name).weight;
  }
  xmod::v1::GetUsageResponse response;
  response.set_window_ms(window);
  response.set_now_unix_ms(now_ms);
  for (const auto& [name, row] : rows) {
    const scheduling::UserPolicy user = policy.For(name);
    xmod::v1::UserUsage* u = response.add_users();
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
