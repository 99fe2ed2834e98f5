// The user API's reads. See user_queries.h.
#include "coordinator/api/user_queries.h"

#include <utility>

#include "coordinator/api/run_listing.h"
#include "coordinator/spec/request_limits.h"
#include "coordinator/store/design_store.h"
#include "coordinator/store/event_rows.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/study_rows.h"

namespace xmod {
namespace {

// Decisions and events listed when a request asks for none (limit 0).
constexpr int kDefaultDecisionsListed = 100;
constexpr int kDefaultEventsListed = 100;

// A response whose repeated field (`field`'s) holds `items`.
template <typename Response, typename T, typename Field>
absl::StatusOr<Response> Listed(absl::StatusOr<std::vector<T>> items, Field* (Response::*field)()) {
  if (!items.ok()) return items.status();
  Response out;
  for (T& item : *items) *(out.*field)()->Add() = std::move(item);
  return out;
}

}  // namespace

absl::StatusOr<xmod::v1::Sweep> GetSweep(Store& store, const xmod::v1::GetSweepRequest& request) {
  return store.ReadValue([&](Db& db) { return LoadSweep(db, request.sweep_id()); });
}

absl::StatusOr<xmod::v1::ListSweepsResponse> ListSweeps(
    Store& store, const xmod::v1::ListSweepsRequest& request) {
  if (request.limit() < 0) return absl::InvalidArgumentError("limit: must be >= 0 (0 = all)");
  return Listed(store.ReadValue([&](Db& db) { return LoadSweeps(db, request.limit()); }),
                &xmod::v1::ListSweepsResponse::mutable_sweeps);
}

absl::StatusOr<xmod::v1::ListRunsResponse> ListRuns(Store& store,
                                                    const xmod::v1::ListRunsRequest& request,
                                                    UnknownSweep unknown_sweep) {
  if (absl::Status s = CheckListRuns(request); !s.ok()) return s;
  return store.ReadValue([&](Db& db) -> absl::StatusOr<xmod::v1::ListRunsResponse> {
    if (unknown_sweep == UnknownSweep::kNotFound) {
      absl::Status s = LoadSweep(db, request.sweep_id()).status();
      if (!s.ok()) return s;
    }
    return LoadListRunsPage(db, request);
  });
}

absl::StatusOr<xmod::v1::GetRunResponse> GetRun(Store& store,
                                                const xmod::v1::GetRunRequest& request) {
  return store.ReadValue([&](Db& db) -> absl::StatusOr<xmod::v1::GetRunResponse> {
    xmod::v1::GetRunResponse out;
    absl::StatusOr<xmod::v1::Run> run = LoadRun(db, request.run_id());
    if (!run.ok()) return run.status();
    *out.mutable_run() = *std::move(run);
    absl::StatusOr<std::vector<xmod::v1::Attempt>> attempts = LoadAttempts(db, request.run_id());
    if (!attempts.ok()) return attempts.status();
    for (xmod::v1::Attempt& a : *attempts) *out.add_attempts() = std::move(a);
    absl::StatusOr<std::vector<xmod::v1::Checkpoint>> checkpoints =
        LoadCheckpoints(db, request.run_id());
    if (!checkpoints.ok()) return checkpoints.status();
    for (xmod::v1::Checkpoint& c : *checkpoints) *out.add_checkpoints() = std::move(c);
    return out;
  });
}

absl::StatusOr<xmod::v1::GetMetricsResponse> GetMetrics(Store& store,
                                                        const xmod::v1::GetMetricsRequest& request,
                                                        int max_points) {
  if (absl::Status s = CheckLimits(request, max_points); !s.ok()) return s;
  xmod::v1::GetMetricsResponse out;
  absl::Status read = store.Read([&](Db& db) { return LoadRunMetrics(db, request, &out); });
  if (!read.ok()) return read;
  return out;
}

absl::StatusOr<xmod::v1::ListDecisionsResponse> ListDecisions(
    Store& store, const xmod::v1::ListDecisionsRequest& request) {
  if (absl::Status s = CheckRange("limit", request.limit(), 0, kMaxDecisionsListed); !s.ok()) {
    return s;
  }
  const int limit = request.limit() > 0 ? request.limit() : kDefaultDecisionsListed;
  return Listed(
      store.ReadValue([&](Db& db) -> absl::StatusOr<std::vector<xmod::v1::DesignDecision>> {
        absl::Status s = LoadSweep(db, request.sweep_id()).status();
        if (!s.ok()) return s;
        return LoadDecisions(db, request.sweep_id(), limit);
      }),
      &xmod::v1::ListDecisionsResponse::mutable_decisions);
}

absl::StatusOr<xmod::v1::Study> GetStudy(Store& store, const xmod::v1::GetStudyRequest& request) {
  return store.ReadValue([&](Db& db) { return LoadStudy(db, request.name()); });
}

absl::StatusOr<xmod::v1::ListStudiesResponse> ListStudies(
    Store& store, const xmod::v1::ListStudiesRequest& /*request*/) {
  return Listed(store.ReadValue([](Db& db) { return LoadStudies(db); }),
                &xmod::v1::ListStudiesResponse::mutable_studies);
}

absl::StatusOr<xmod::v1::WatchSweepEvent> ReadSweepEvent(Store& store, int64_t sweep_id,
                                                         const std::vector<int64_t>* run_ids) {
  RunFilter filter;
  filter.sweep_id = sweep_id;
  if (run_ids != nullptr) filter.run_ids = *run_ids;
  return store.ReadValue([&](Db& db) -> absl::StatusOr<xmod::v1::WatchSweepEvent> {
    xmod::v1::WatchSweepEvent out;
    absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, sweep_id);
    if (!sweep.ok()) return sweep.status();
    *out.mutable_sweep() = *std::move(sweep);
    if (run_ids != nullptr && run_ids->empty()) return out;
    absl::StatusOr<std::vector<xmod::v1::Run>> runs = LoadRuns(db, filter);
    if (!runs.ok()) return runs.status();
    for (xmod::v1::Run& r : *runs) *out.add_runs() = std::move(r);
    return out;
  });
}

absl::StatusOr<xmod::v1::ListEventsResponse> ListEvents(
    Store& store, const xmod::v1::ListEventsRequest& request) {
  if (absl::Status s = CheckLimits(request); !s.ok()) return s;
  EventQuery query;
  query.sweep_id = request.sweep_id();
  query.run_id = request.run_id();
  if (request.has_actor()) query.actor = request.actor();
  query.before_id = request.before_id();
  const int limit = request.limit() == 0 ? kDefaultEventsListed : request.limit();
  query.limit = limit + 1;  // one more tells whether another page follows
  absl::StatusOr<std::vector<xmod::v1::Event>> events =
      store.ReadValue([&](Db& db) { return LoadEvents(db, query); });
  if (!events.ok()) return events.status();
  xmod::v1::ListEventsResponse out;
  for (size_t i = 0; i < events->size() && static_cast<int>(i) < limit; ++i) {
    *out.add_events() = std::move((*events)[i]);
  }
  if (static_cast<int>(events->size()) > limit) {
    out.set_next_before_id(out.events(limit - 1).id());
  }
  return out;
}

}  // namespace xmod
