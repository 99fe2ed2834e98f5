// See coordinator_service.h.
#include "coordinator/api/coordinator_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/api/service_util.h"
#include "coordinator/design/adaptive_controller.h"
#include "coordinator/fitting/fit_queries.h"
#include "coordinator/fitting/fit_trigger.h"
#include "coordinator/fitting/studies.h"
#include "coordinator/spec/request_limits.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/store/store_reads.h"
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
      watches_("WatchSweep", "open streams", options_.watch_limits),
      proposals_("ProposeRuns", "fits running", options_.proposal_limits) {}

void CoordinatorService::Stop() {
  stopping_ = true;
  feed_->WakeAll();
}

grpc::Status CoordinatorService::SubmitSweep(ServerContext* context,
                                             const xmod::v1::SubmitSweepRequest* request,
                                             xmod::v1::SubmitSweepResponse* response) {
  return Serve("SubmitSweep", request->dry_run() ? Access::kRead : Access::kWrite,
               *options_.credentials, context, metrics_, [&]() -> absl::Status {
                 ExpansionOptions expansion;
                 expansion.check_data_paths = options_.check_data_paths;
                 expansion.data_roots = options_.data_roots;
                 expansion.limits = options_.spec_limits;
                 absl::StatusOr<std::vector<xmod::v1::Run>> runs =
                     ExpandSweep(request->spec(), expansion);
                 if (!runs.ok()) return runs.status();
                 if (request->spec().adaptive().enabled()) {
                   // The grids are the candidate space; only the seed set is queued.
                   runs = SeedRuns(request->spec(), *runs);
                   if (!runs.ok()) return runs.status();
                 }
                 if (!request->dry_run()) {
                   absl::StatusOr<int64_t> id = scheduler_->SubmitSweep(request->spec(), &*runs);
                   if (!id.ok()) return id.status();
                   response->set_sweep_id(*id);
                 }
                 for (xmod::v1::Run& run : *runs) *response->add_runs() = std::move(run);
                 return absl::OkStatus();
               });
}

grpc::Status CoordinatorService::GetSweep(ServerContext* context,
                                          const xmod::v1::GetSweepRequest* request,
                                          xmod::v1::Sweep* response) {
  return Serve("GetSweep", Access::kRead, *options_.credentials, context, metrics_, [&] {
    return store_->Read([&](Db& db) {
      absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, request->sweep_id());
      if (!sweep.ok()) return sweep.status();
      *response = *std::move(sweep);
      return absl::OkStatus();
    });
  });
}

grpc::Status CoordinatorService::ListSweeps(ServerContext* context,
                                            const xmod::v1::ListSweepsRequest* request,
                                            xmod::v1::ListSweepsResponse* response) {
  return Serve("ListSweeps", Access::kRead, *options_.credentials, context, metrics_, [&] {
    if (request->limit() < 0) return absl::InvalidArgumentError("limit: must be >= 0 (0 = all)");
    return store_->Read([&](Db& db) {
      absl::StatusOr<std::vector<xmod::v1::Sweep>> sweeps = LoadSweeps(db, request->limit());
      if (!sweeps.ok()) return sweeps.status();
      for (xmod::v1::Sweep& s : *sweeps) *response->add_sweeps() = std::move(s);
      return absl::OkStatus();
    });
  });
}

grpc::Status CoordinatorService::CancelSweep(ServerContext* context,
                                             const xmod::v1::CancelSweepRequest* request,
                                             xmod::v1::Sweep* response) {
  return Serve("CancelSweep", Access::kWrite, *options_.credentials, context, metrics_, [&] {
    absl::Status exists =
        store_->Read([&](Db& db) { return LoadSweep(db, request->sweep_id()).status(); });
    if (!exists.ok()) return exists;
    if (absl::Status s = scheduler_->CancelSweep(request->sweep_id()); !s.ok()) return s;
    if (options_.fit_trigger != nullptr) options_.fit_trigger->CancelFit(request->sweep_id());
    return store_->Read([&](Db& db) {
      absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, request->sweep_id());
      if (!sweep.ok()) return sweep.status();
      *response = *std::move(sweep);
      return absl::OkStatus();
    });
  });
}

grpc::Status CoordinatorService::RetryFailed(ServerContext* context,
                                             const xmod::v1::RetryFailedRequest* request,
                                             xmod::v1::RetryFailedResponse* response) {
  return Serve("RetryFailed", Access::kWrite, *options_.credentials, context, metrics_,
               [&]() -> absl::Status {
                 absl::StatusOr<std::vector<int64_t>> ids =
                     scheduler_->RetryFailed(request->sweep_id());
                 if (!ids.ok()) return ids.status();
                 for (int64_t id : *ids) response->add_run_ids(id);
                 return absl::OkStatus();
               });
}

grpc::Status CoordinatorService::ListRuns(ServerContext* context,
                                          const xmod::v1::ListRunsRequest* request,
                                          xmod::v1::ListRunsResponse* response) {
  return Serve("ListRuns", Access::kRead, *options_.credentials, context, metrics_, [&] {
    if (absl::Status s = CheckLimits(*request); !s.ok()) return s;
    RunFilter filter;
    filter.sweep_id = request->sweep_id();
    for (int s : request->states()) filter.states.push_back(static_cast<xmod::v1::RunState>(s));
    filter.limit = request->limit();
    return store_->Read([&](Db& db) {
      absl::StatusOr<std::vector<xmod::v1::Run>> runs = LoadRuns(db, filter);
      if (!runs.ok()) return runs.status();
      for (xmod::v1::Run& r : *runs) *response->add_runs() = std::move(r);
      return absl::OkStatus();
    });
  });
}

grpc::Status CoordinatorService::GetRun(ServerContext* context,
                                        const xmod::v1::GetRunRequest* request,
                                        xmod::v1::GetRunResponse* response) {
  return Serve("GetRun", Access::kRead, *options_.credentials, context, metrics_, [&] {
    absl::Status read = store_->Read([&](Db& db) {
      absl::StatusOr<xmod::v1::Run> run = LoadRun(db, request->run_id());
      if (!run.ok()) return run.status();
      *response->mutable_run() = *std::move(run);
      absl::StatusOr<std::vector<xmod::v1::Attempt>> attempts = LoadAttempts(db, request->run_id());
      if (!attempts.ok()) return attempts.status();
      for (auto& a : *attempts) *response->add_attempts() = std::move(a);
      absl::StatusOr<std::vector<xmod::v1::Checkpoint>> checkpoints =
          LoadCheckpoints(db, request->run_id());
      if (!checkpoints.ok()) return checkpoints.status();
      for (auto& c : *checkpoints) *response->add_checkpoints() = std::move(c);
      return absl::OkStatus();
    });
    if (read.ok()) response->set_pending_reason(scheduler_->PendingReason(request->run_id()));
    return read;
  });
}

namespace {

absl::Status ReadRun(Store* store, int64_t run_id, xmod::v1::Run* out) {
  return store->Read([&](Db& db) {
    absl::StatusOr<xmod::v1::Run> run = LoadRun(db, run_id);
    if (!run.ok()) return run.status();
    *out = *std::move(run);
    return absl::OkStatus();
  });
}

}  // namespace

grpc::Status CoordinatorService::ResumeRun(ServerContext* context,
                                           const xmod::v1::ResumeRunRequest* request,
                                           xmod::v1::Run* response) {
  return Serve("ResumeRun", Access::kWrite, *options_.credentials, context, metrics_, [&] {
    if (absl::Status s = scheduler_->ResumeRun(request->run_id()); !s.ok()) return s;
    return ReadRun(store_, request->run_id(), response);
  });
}

grpc::Status CoordinatorService::CancelRun(ServerContext* context,
                                           const xmod::v1::CancelRunRequest* request,
                                           xmod::v1::Run* response) {
  return Serve("CancelRun", Access::kWrite, *options_.credentials, context, metrics_, [&] {
    if (absl::Status s = scheduler_->CancelRun(request->run_id()); !s.ok()) return s;
    return ReadRun(store_, request->run_id(), response);
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
        RunFilter filter;
        filter.sweep_id = sweep_id;
        xmod::v1::WatchSweepEvent event;
        absl::Status read = store_->Read([&](Db& db) {
          absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, sweep_id);
          if (!sweep.ok()) return sweep.status();
          *event.mutable_sweep() = *std::move(sweep);
          absl::StatusOr<std::vector<xmod::v1::Run>> runs = LoadRuns(db, filter);
          if (!runs.ok()) return runs.status();
          for (auto& r : *runs) *event.add_runs() = std::move(r);
          return absl::OkStatus();
        });
        if (!read.ok()) return read;
        event.set_snapshot(true);
        if (!writer->Write(event)) return absl::CancelledError("the watcher went away");
        while (event.sweep().state() == xmod::v1::SWEEP_ACTIVE) {
          if (context->IsCancelled()) return absl::CancelledError("the watcher went away");
          if (stopping_) return absl::UnavailableError("the coordinator is shutting down");
          ChangeFeed::Changes changes = feed_->WaitForChanges(sweep_id, since, absl::Seconds(1));
          since = changes.version;
          if (changes.run_ids.empty()) continue;
          event.Clear();
          filter.run_ids.clear();
          for (int64_t id : changes.run_ids) {
            if (id > 0) filter.run_ids.push_back(id);
          }
          read = store_->Read([&](Db& db) {
            absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, sweep_id);
            if (!sweep.ok()) return sweep.status();
            *event.mutable_sweep() = *std::move(sweep);
            if (filter.run_ids.empty()) return absl::OkStatus();
            absl::StatusOr<std::vector<xmod::v1::Run>> runs = LoadRuns(db, filter);
            if (!runs.ok()) return runs.status();
            for (auto& r : *runs) *event.add_runs() = std::move(r);
            return absl::OkStatus();
          });
          if (!read.ok()) return read;
          if (!writer->Write(event)) return absl::CancelledError("the watcher went away");
        }
        return absl::OkStatus();
      });
}

grpc::Status CoordinatorService::GetMetrics(ServerContext* context,
                                            const xmod::v1::GetMetricsRequest* request,
                                            xmod::v1::GetMetricsResponse* response) {
  return Serve("GetMetrics", Access::kRead, *options_.credentials, context, metrics_, [&] {
    if (absl::Status s = CheckLimits(*request, options_.max_metric_points); !s.ok()) return s;
    return store_->Read([&](Db& db) { return LoadRunMetrics(db, *request, response); });
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
               [&]() -> absl::Status {
                 absl::StatusOr<xmod::v1::Fit> fit = LatestUsableFit(*store_, *request);
                 if (!fit.ok()) return fit.status();
                 *response = *std::move(fit);
                 return absl::OkStatus();
               });
}

grpc::Status CoordinatorService::Predict(ServerContext* context,
                                         const xmod::v1::PredictRequest* request,
                                         xmod::v1::PredictResponse* response) {
  return Serve("Predict", Access::kRead, *options_.credentials, context, metrics_,
               [&]() -> absl::Status {
                 absl::StatusOr<xmod::v1::PredictResponse> predicted =
                     PredictWithLatestFit(*store_, *request);
                 if (!predicted.ok()) return predicted.status();
                 *response = *std::move(predicted);
                 return absl::OkStatus();
               });
}

grpc::Status CoordinatorService::Recommend(ServerContext* context,
                                           const xmod::v1::RecommendRequest* request,
                                           xmod::v1::RecommendResponse* response) {
  return Serve("Recommend", Access::kRead, *options_.credentials, context, metrics_,
               [&]() -> absl::Status {
                 absl::StatusOr<xmod::v1::RecommendResponse> recommended =
                     RecommendWithLatestFit(*store_, *request);
                 if (!recommended.ok()) return recommended.status();
                 *response = *std::move(recommended);
                 return absl::OkStatus();
               });
}

grpc::Status CoordinatorService::Plan(ServerContext* context, const xmod::v1::PlanRequest* request,
                                      xmod::v1::PlanResponse* response) {
  return Serve(
      "Plan", Access::kRead, *options_.credentials, context, metrics_, [&]() -> absl::Status {
        absl::StatusOr<xmod::v1::PlanResponse> plan =
            PlanModel(request->model(), request->seq_len());
        if (!plan.ok()) {
          // Account names fields relative to ModelSpec; the request nests it under "model".
          const std::string message(plan.status().message());
          return absl::InvalidArgumentError(
              absl::StartsWith(message, "seq_len") ? message : absl::StrCat("model.", message));
        }
        *response = *std::move(plan);
        return absl::OkStatus();
      });
}

// Studies (studies.h). A new study is fitted at the fit trigger's next poll.
grpc::Status CoordinatorService::CreateStudy(ServerContext* context,
                                             const xmod::v1::CreateStudyRequest* request,
                                             xmod::v1::Study* response) {
  return Serve("CreateStudy", Access::kWrite, *options_.credentials, context, metrics_, [&] {
    const int64_t now_ms = options_.clock->NowMillis();
    return store_->WriteAndWait([&](Db& db) -> absl::Status {
      absl::StatusOr<xmod::v1::Study> study =
          InsertStudy(db, request->spec(), options_.spec_limits.max_bootstrap_samples, now_ms);
      if (!study.ok()) return study.status();
      *response = *std::move(study);
      return absl::OkStatus();
    });
  });
}

grpc::Status CoordinatorService::GetStudy(ServerContext* context,
                                          const xmod::v1::GetStudyRequest* request,
                                          xmod::v1::Study* response) {
  return Serve("GetStudy", Access::kRead, *options_.credentials, context, metrics_, [&] {
    return store_->Read([&](Db& db) {
      absl::StatusOr<xmod::v1::Study> study = LoadStudy(db, request->name());
      if (!study.ok()) return study.status();
      *response = *std::move(study);
      return absl::OkStatus();
    });
  });
}

grpc::Status CoordinatorService::ListStudies(ServerContext* context,
                                             const xmod::v1::ListStudiesRequest* /*request*/,
                                             xmod::v1::ListStudiesResponse* response) {
  return Serve("ListStudies", Access::kRead, *options_.credentials, context, metrics_, [&] {
    return store_->Read([&](Db& db) {
      absl::StatusOr<std::vector<xmod::v1::Study>> studies = LoadStudies(db);
      if (!studies.ok()) return studies.status();
      for (xmod::v1::Study& s : *studies) *response->add_studies() = std::move(s);
      return absl::OkStatus();
    });
  });
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
        // Each fit is a core's work for as long as its ensemble takes: capped, and
        // stopped when the caller goes away.
        absl::StatusOr<std::unique_ptr<StreamCaps::Place>> place = proposals_.Open(caller);
        if (!place.ok()) return place.status();
        absl::StatusOr<xmod::v1::DesignDecision> decision =
            options_.adaptive->Propose(*request, [context] { return context->IsCancelled(); });
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
                 if (absl::Status s = CheckRange("limit", request->limit(), 0, kMaxDecisionsListed);
                     !s.ok()) {
                   return s;
                 }
                 absl::StatusOr<std::vector<xmod::v1::DesignDecision>> decisions =
                     options_.adaptive->Decisions(request->sweep_id(),
                                                  request->limit() > 0 ? request->limit() : 100);
                 if (!decisions.ok()) return decisions.status();
                 for (auto& d : *decisions) *response->add_decisions() = std::move(d);
                 return absl::OkStatus();
               });
}

}  // namespace xmod
