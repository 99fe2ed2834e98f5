// See coordinator_service.h.
#include "coordinator/api/coordinator_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/field_path.h"
#include "coordinator/api/pilot_queries.h"
#include "coordinator/api/service_util.h"
#include "coordinator/api/sweep_forecast.h"
#include "coordinator/api/usage_queries.h"
#include "coordinator/api/user_queries.h"
#include "coordinator/adaptive/adaptive_controller.h"
#include "coordinator/adaptive/seeding.h"
#include "coordinator/fitting/fit_queries.h"
#include "coordinator/fitting/fit_trigger.h"
#include "coordinator/fitting/studies.h"
#include "coordinator/fitting/study_sharing.h"
#include "coordinator/spec/request_limits.h"
#include "coordinator/spec/sweep_expansion.h"
#include "glog/logging.h"
#include "model/accounting/accounting.h"
#include "model/accounting/plan_response.h"

namespace xmod {

using grpc::ServerContext;

CoordinatorService::CoordinatorService(Store* store, Scheduler* scheduler, ChangeFeed* feed,
                                       CoordinatorMetrics* metrics,
                                       CoordinatorServiceOptions options)
    : store_(store),
      scheduler_(scheduler),
      feed_(feed),
      metrics_(metrics),
      options_(std::move(options)),
      actions_(*options_.actions),
      watches_("WatchSweep", "open streams", options_.watch_limits),
      proposals_("ProposeRuns", "fits running", options_.proposal_limits),
      backups_(store, options_.backup_dir, options_.clock) {}

void CoordinatorService::Stop() {
  stopping_ = true;
  feed_->WakeAll();
}

grpc::Status CoordinatorService::SubmitSweep(ServerContext* context,
                                             const xmod::v1::SubmitSweepRequest* request,
                                             xmod::v1::SubmitSweepResponse* response) {
  return Serve(
      "SubmitSweep", request->dry_run() ? Access::kRead : Access::kWrite, *options_.credentials,
      context, metrics_, [&](const Principal& caller) -> absl::Status {
        // What the sharing config grants the caller, before anything is looked up.
        if (absl::Status s = scheduling::CheckGrants(request->spec(), caller.name,
                                                     scheduler_->options().sharing);
            !s.ok()) {
          return s;
        }
        ExpansionOptions expansion;
        expansion.check_data_paths = options_.check_data_paths;
        expansion.data_roots = options_.data_roots;
        expansion.limits = options_.spec_limits;
        // The one expansion of the spec: the runs queued (for an adaptive design,
        // its seed set) come from it.
        absl::StatusOr<ExpandedSweep> sweep = ExpandForSubmission(request->spec(), expansion);
        if (!sweep.ok()) return sweep.status();
        if (!request->dry_run()) {
          absl::StatusOr<int64_t> id =
              scheduler_->SubmitSweep(request->spec(), &sweep->runs, caller.name);
          if (!id.ok()) return id.status();
          response->set_sweep_id(*id);
        } else if (absl::Status s = Forecast(sweep->runs, response->mutable_forecast()); !s.ok()) {
          return s;
        }
        for (xmod::v1::Run& run : sweep->runs) *response->add_runs() = std::move(run);
        return absl::OkStatus();
      });
}

absl::Status CoordinatorService::Forecast(const std::vector<xmod::v1::Run>& runs,
                                          xmod::v1::SweepForecast* forecast) {
  std::vector<ThroughputSample> measured;
  SlotCounts slots;
  absl::Status read = store_->Read([&](Db& db) {
    absl::StatusOr<std::vector<ThroughputSample>> samples =
        LoadThroughputSamples(db, kForecastSamples);
    if (!samples.ok()) return samples.status();
    measured = *std::move(samples);
    absl::StatusOr<SlotCounts> counts =
        LoadRecentSlots(db, options_.clock->NowMillis() - kForecastSlotsSeenMs);
    if (!counts.ok()) return counts.status();
    slots = *counts;
    return absl::OkStatus();
  });
  if (!read.ok()) return read;
  *forecast = ForecastSweep(runs, measured, slots);
  return absl::OkStatus();
}

namespace {

// A read's answer into the RPC's response.
template <typename T>
absl::Status Answer(absl::StatusOr<T> answer, T* response) {
  if (!answer.ok()) return answer.status();
  *response = *std::move(answer);
  return absl::OkStatus();
}

}  // namespace

grpc::Status CoordinatorService::GetSweep(ServerContext* context,
                                          const xmod::v1::GetSweepRequest* request,
                                          xmod::v1::Sweep* response) {
  return Serve("GetSweep", Access::kRead, *options_.credentials, context, metrics_,
               [&] { return Answer(xmod::GetSweep(*store_, *request), response); });
}

grpc::Status CoordinatorService::ListSweeps(ServerContext* context,
                                            const xmod::v1::ListSweepsRequest* request,
                                            xmod::v1::ListSweepsResponse* response) {
  return Serve("ListSweeps", Access::kRead, *options_.credentials, context, metrics_,
               [&] { return Answer(xmod::ListSweeps(*store_, *request), response); });
}

grpc::Status CoordinatorService::CancelSweep(ServerContext* context,
                                             const xmod::v1::CancelSweepRequest* request,
                                             xmod::v1::Sweep* response) {
  return Serve("CancelSweep", Access::kWrite, *options_.credentials, context, metrics_,
               [&](const Principal& caller) {
                 return Answer(actions_.CancelSweep("CancelSweep", caller, request->sweep_id()),
                               response);
               });
}

grpc::Status CoordinatorService::RetryFailed(ServerContext* context,
                                             const xmod::v1::RetryFailedRequest* request,
                                             xmod::v1::RetryFailedResponse* response) {
  return Serve("RetryFailed", Access::kWrite, *options_.credentials, context, metrics_,
               [&](const Principal& caller) {
                 return Answer(actions_.RetryFailed("RetryFailed", caller, request->sweep_id()),
                               response);
               });
}

grpc::Status CoordinatorService::ListRuns(ServerContext* context,
                                          const xmod::v1::ListRunsRequest* request,
                                          xmod::v1::ListRunsResponse* response) {
  return Serve("ListRuns", Access::kRead, *options_.credentials, context, metrics_, [&] {
    return Answer(xmod::ListRuns(*store_, *request, UnknownSweep::kNoRuns), response);
  });
}

grpc::Status CoordinatorService::GetRun(ServerContext* context,
                                        const xmod::v1::GetRunRequest* request,
                                        xmod::v1::GetRunResponse* response) {
  return Serve("GetRun", Access::kRead, *options_.credentials, context, metrics_, [&] {
    absl::Status read = Answer(xmod::GetRun(*store_, *request), response);
    if (!read.ok()) return read;
    response->set_pending_reason(scheduler_->PendingReason(request->run_id()));
    return AddRunSharing(*store_, response);
  });
}

grpc::Status CoordinatorService::ResumeRun(ServerContext* context,
                                           const xmod::v1::ResumeRunRequest* request,
                                           xmod::v1::Run* response) {
  return Serve("ResumeRun", Access::kWrite, *options_.credentials, context, metrics_,
               [&](const Principal& caller) {
                 return Answer(actions_.ResumeRun("ResumeRun", caller, request->run_id()),
                               response);
               });
}

grpc::Status CoordinatorService::CancelRun(ServerContext* context,
                                           const xmod::v1::CancelRunRequest* request,
                                           xmod::v1::Run* response) {
  return Serve("CancelRun", Access::kWrite, *options_.credentials, context, metrics_,
               [&](const Principal& caller) {
                 return Answer(actions_.CancelRun("CancelRun", caller, request->run_id()),
                               response);
               });
}

grpc::Status CoordinatorService::WatchSweep(ServerContext* context,
                                            const xmod::v1::WatchSweepRequest* request,
                                            grpc::ServerWriter<xmod::v1::WatchSweepEvent>* writer) {
  return Serve(
      "WatchSweep", Access::kRead, *options_.credentials, context, metrics_,  // capped per caller
      [&](const Principal& caller) -> absl::Status {
        absl::StatusOr<std::unique_ptr<StreamCaps::Place>> place = watches_.Open(caller);
        if (!place.ok()) return place.status();
        const int64_t sweep_id = request->sweep_id();
        // Take the version before the snapshot: a change racing with it is sent again, not lost.
        int64_t since = feed_->Version();
        absl::StatusOr<xmod::v1::WatchSweepEvent> event =
            ReadSweepEvent(*store_, sweep_id, /*run_ids=*/nullptr);
        if (!event.ok()) return event.status();
        event->set_snapshot(true);
        if (!writer->Write(*event)) return absl::CancelledError("the watcher went away");
        while (event->sweep().state() == xmod::v1::SWEEP_ACTIVE) {
          if (context->IsCancelled()) return absl::CancelledError("the watcher went away");
          if (stopping_) return absl::UnavailableError("the coordinator is shutting down");
          ChangeFeed::Changes changes = feed_->WaitForChanges(sweep_id, since, absl::Seconds(1));
          since = changes.version;
          if (changes.run_ids.empty()) continue;
          std::vector<int64_t> run_ids;
          for (int64_t id : changes.run_ids) {
            if (id > 0) run_ids.push_back(id);
          }
          event = ReadSweepEvent(*store_, sweep_id, &run_ids);
          if (!event.ok()) return event.status();
          if (!writer->Write(*event)) return absl::CancelledError("the watcher went away");
        }
        return absl::OkStatus();
      });
}

grpc::Status CoordinatorService::GetMetrics(ServerContext* context,
                                            const xmod::v1::GetMetricsRequest* request,
                                            xmod::v1::GetMetricsResponse* response) {
  return Serve("GetMetrics", Access::kRead, *options_.credentials, context, metrics_, [&] {
    return Answer(xmod::GetMetrics(*store_, *request, options_.max_metric_points), response);
  });
}

grpc::Status CoordinatorService::Query(ServerContext* context,
                                       const xmod::v1::QueryRequest* request,
                                       xmod::v1::QueryResponse* response) {
  return Serve("Query", Access::kRead, *options_.credentials, context, metrics_,
               [&]() -> absl::Status {
                 const absl::Status rows_asked =
                     CheckRange("max_rows", request->max_rows(), 0, options_.query_limits.max_rows);
                 if (!rows_asked.ok()) return rows_asked;
                 absl::StatusOr<QueryResult> result =
                     store_->Query(request->sql(), request->max_rows(), options_.query_limits,
                                   [context] { return context->IsCancelled(); });
                 if (!result.ok()) return result.status();
                 for (const std::string& c : result->columns) response->add_columns(c);
                 for (size_t i = 0; i < result->rows.size(); ++i) {
                   xmod::v1::QueryRow* row = response->add_rows();
                   for (size_t c = 0; c < result->rows[i].size(); ++c) {
                     row->add_values(result->rows[i][c]);
                     row->add_is_null(result->nulls[i][c]);
                   }
                 }
                 response->set_truncated(result->truncated);
                 return absl::OkStatus();
               });
}

// The fit calls answer from the latest stored fit (fit_queries.h); fits are written in the
// background by the FitTrigger.
grpc::Status CoordinatorService::GetFit(ServerContext* context,
                                        const xmod::v1::GetFitRequest* request,
                                        xmod::v1::Fit* response) {
  return Serve("GetFit", Access::kRead, *options_.credentials, context, metrics_,
               [&] { return Answer(LatestUsableFit(*store_, *request), response); });
}

grpc::Status CoordinatorService::Predict(ServerContext* context,
                                         const xmod::v1::PredictRequest* request,
                                         xmod::v1::PredictResponse* response) {
  return Serve("Predict", Access::kRead, *options_.credentials, context, metrics_,
               [&] { return Answer(PredictWithLatestFit(*store_, *request), response); });
}

grpc::Status CoordinatorService::Recommend(ServerContext* context,
                                           const xmod::v1::RecommendRequest* request,
                                           xmod::v1::RecommendResponse* response) {
  return Serve("Recommend", Access::kRead, *options_.credentials, context, metrics_,
               [&] { return Answer(RecommendWithLatestFit(*store_, *request), response); });
}

grpc::Status CoordinatorService::Plan(ServerContext* context, const xmod::v1::PlanRequest* request,
                                      xmod::v1::PlanResponse* response) {
  return Serve(
      "Plan", Access::kRead, *options_.credentials, context, metrics_, [&]() -> absl::Status {
        absl::StatusOr<xmod::v1::PlanResponse> plan =
            PlanModel(request->model(), request->seq_len());
        if (!plan.ok()) {
          // Account names fields relative to ModelSpec; the request nests it under "model".
          const std::optional<std::string> path = FieldPathOf(plan.status());
          return path && absl::StartsWith(*path, "seq_len") ? plan.status()
                                                            : Reroot(plan.status(), "model.");
        }
        *response = *std::move(plan);
        return absl::OkStatus();
      });
}

// Studies (studies.h; user_actions.h). A new study is fitted at the fit trigger's next poll.
// A member's run that an earlier member trains too is linked to that run and cancelled
// (study_sharing.h); a dry run only counts.
grpc::Status CoordinatorService::CreateStudy(ServerContext* context,
                                             const xmod::v1::CreateStudyRequest* request,
                                             xmod::v1::Study* response) {
  return Serve("CreateStudy", request->dry_run() ? Access::kRead : Access::kWrite,
               *options_.credentials, context, metrics_, [&](const Principal& caller) {
                 return Answer(actions_.CreateStudy("CreateStudy", caller, *request,
                                                    options_.spec_limits.max_bootstrap_samples,
                                                    options_.clock->NowMillis()),
                               response);
               });
}

grpc::Status CoordinatorService::GetStudy(ServerContext* context,
                                          const xmod::v1::GetStudyRequest* request,
                                          xmod::v1::Study* response) {
  return Serve("GetStudy", Access::kRead, *options_.credentials, context, metrics_,
               [&] { return Answer(xmod::GetStudy(*store_, *request), response); });
}

grpc::Status CoordinatorService::ListStudies(ServerContext* context,
                                             const xmod::v1::ListStudiesRequest* request,
                                             xmod::v1::ListStudiesResponse* response) {
  return Serve("ListStudies", Access::kRead, *options_.credentials, context, metrics_,
               [&] { return Answer(xmod::ListStudies(*store_, *request), response); });
}

grpc::Status CoordinatorService::ProposeRuns(ServerContext* context,
                                             const xmod::v1::ProposeRunsRequest* request,
                                             xmod::v1::DesignDecision* response) {
  return Serve(
      "ProposeRuns", request->submit() ? Access::kWrite : Access::kRead, *options_.credentials,
      context, metrics_, [&](const Principal& caller) -> absl::Status {
        if (options_.adaptive == nullptr) {
          return absl::UnavailableError("this coordinator makes no design decisions");
        }
        // Runs go into the sweep only when it is the caller's to change: checked before the
        // fit, which takes a core for as long as its ensemble does.
        if (request->submit()) {
          if (absl::Status s = actions_.CheckSweep("ProposeRuns", caller, request->sweep_id());
              !s.ok()) {
            return s;
          }
        }
        // Each fit is a core's work for as long as its ensemble takes: capped, and
        // stopped when the caller goes away.
        absl::StatusOr<std::unique_ptr<StreamCaps::Place>> place = proposals_.Open(caller);
        if (!place.ok()) return place.status();
        absl::StatusOr<xmod::v1::DesignDecision> decision = options_.adaptive->Propose(
            *request, [context] { return context->IsCancelled(); },
            request->submit() ? ActorOf(caller) : std::nullopt);
        if (!decision.ok()) return decision.status();
        *response = *std::move(decision);
        return absl::OkStatus();
      });
}

grpc::Status CoordinatorService::ListDecisions(ServerContext* context,
                                               const xmod::v1::ListDecisionsRequest* request,
                                               xmod::v1::ListDecisionsResponse* response) {
  return Serve("ListDecisions", Access::kRead, *options_.credentials, context, metrics_,
               [&]() -> absl::Status {
                 if (options_.adaptive == nullptr) {
                   return absl::UnavailableError("this coordinator makes no design decisions");
                 }
                 return Answer(xmod::ListDecisions(*store_, *request), response);
               });
}

// The B.3 pilot pick by measured loss (pilot_queries.h).
grpc::Status CoordinatorService::SelectPilot(ServerContext* context,
                                             const xmod::v1::SelectPilotRequest* request,
                                             xmod::v1::SelectPilotResponse* response) {
  return Serve("SelectPilot", Access::kRead, *options_.credentials, context, metrics_,
               [&] { return Answer(xmod::SelectPilot(*store_, *request), response); });
}

grpc::Status CoordinatorService::GetUsage(ServerContext* context,
                                          const xmod::v1::GetUsageRequest* request,
                                          xmod::v1::GetUsageResponse* response) {
  return Serve("GetUsage", Access::kRead, *options_.credentials, context, metrics_, [&] {
    return Answer(xmod::GetUsage(*store_, scheduler_->options().sharing, *request,
                                 options_.clock->NowMillis()),
                  response);
  });
}

grpc::Status CoordinatorService::ListEvents(ServerContext* context,
                                            const xmod::v1::ListEventsRequest* request,
                                            xmod::v1::ListEventsResponse* response) {
  return Serve("ListEvents", Access::kRead, *options_.credentials, context, metrics_,
               [&] { return Answer(xmod::ListEvents(*store_, *request), response); });
}

// An operator's online backup (backups.h), streamed as it is read.
grpc::Status CoordinatorService::Backup(ServerContext* context, const xmod::v1::BackupRequest*,
                                        grpc::ServerWriter<xmod::v1::BackupChunk>* writer) {
  return Serve("Backup", Access::kAdmin, *options_.credentials, context, metrics_, [&] {
    return backups_.Stream(writer, [context] { return context->IsCancelled(); });
  });
}

}  // namespace xmod
