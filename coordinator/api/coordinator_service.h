// CoordinatorService: the user API (xmod.v1.Coordinator, proto/xmod/v1/coordinator.proto)
// over the store and the scheduler. Every RPC authenticates its caller (common/auth.h): reads
// need the user, admin or read scope, changes (SubmitSweep without dry_run, Cancel*, Retry*,
// Resume*, CreateStudy, ProposeRuns with submit) the user or admin scope, and a change to
// existing work must be the caller's to make (ownership.h: its own or its groups' work, or an
// admin's); a read-scope call, and a refused change, changes no row of any table. A
// submission must stay within what the sharing config grants its user (CheckGrants:
// priority, non-preemptible runs). Numeric request fields that size work are refused past their
// caps (request_limits.h, QueryLimits, max_metric_points) with INVALID_ARGUMENT naming the field;
// open WatchSweep streams and ProposeRuns fits running are bounded per credential and in all
// (StreamLimits), past which a call is refused with RESOURCE_EXHAUSTED.
// Thread-safe (gRPC calls handlers concurrently).
#ifndef XMOD_COORDINATOR_API_COORDINATOR_SERVICE_H_
#define XMOD_COORDINATOR_API_COORDINATOR_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/credentials.h"
#include "coordinator/api/backups.h"
#include "coordinator/api/stream_caps.h"
#include "coordinator/api/user_actions.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/store/change_feed.h"
#include "coordinator/store/store.h"
#include "coordinator/store/store_reads.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod {

class AdaptiveController;
class FitTrigger;

struct CoordinatorServiceOptions {
  // Who may call; empty = everyone (anonymous). Never null.
  std::shared_ptr<const CredentialSet> credentials = std::make_shared<CredentialSet>();
  bool check_data_paths = true;              // see ExpansionOptions
  std::vector<std::string> data_roots;       // see ExpansionOptions
  SpecLimits spec_limits;                    // sizes a submitted sweep may have
  QueryLimits query_limits;                  // ceilings of Query, whatever max_rows asks for
  int max_metric_points = kMaxMetricPoints;  // GetMetrics: points per series at most
  StreamLimits watch_limits;                 // open WatchSweep streams at most
  // ProposeRuns fits running at once (submitted or not; a fit keeps a core busy): 2 per
  // credential, 4 in all.
  StreamLimits proposal_limits = {2, 4};
  // The changes to existing work (cancel, retry, resume, studies), checked for ownership;
  // shared with the dashboard's POST routes. Never null.
  UserActions* actions = nullptr;
  // Serves ProposeRuns and ListDecisions. May be null: they answer UNAVAILABLE.
  AdaptiveController* adaptive = nullptr;
  // Stamps created studies and backups. Never null.
  Clock* clock = Clock::Real();
  // Where Backup writes its snapshot before streaming it (the database's folder); "" takes
  // no backups.
  std::string backup_dir;
};

class CoordinatorService final : public xmod::v1::Coordinator::Service {
 public:
  // Everything must outlive the service; `metrics` may be null.
  CoordinatorService(Store* store, Scheduler* scheduler, ChangeFeed* feed,
                     CoordinatorMetrics* metrics, CoordinatorServiceOptions options);

  // Ends open WatchSweep streams (at shutdown).
  void Stop();

  grpc::Status SubmitSweep(grpc::ServerContext* context,
                           const xmod::v1::SubmitSweepRequest* request,
                           xmod::v1::SubmitSweepResponse* response) override;
  grpc::Status GetSweep(grpc::ServerContext* context, const xmod::v1::GetSweepRequest* request,
                        xmod::v1::Sweep* response) override;
  grpc::Status ListSweeps(grpc::ServerContext* context, const xmod::v1::ListSweepsRequest* request,
                          xmod::v1::ListSweepsResponse* response) override;
  grpc::Status CancelSweep(grpc::ServerContext* context,
                           const xmod::v1::CancelSweepRequest* request,
                           xmod::v1::Sweep* response) override;
  grpc::Status RetryFailed(grpc::ServerContext* context,
                           const xmod::v1::RetryFailedRequest* request,
                           xmod::v1::RetryFailedResponse* response) override;
  grpc::Status ListRuns(grpc::ServerContext* context, const xmod::v1::ListRunsRequest* request,
                        xmod::v1::ListRunsResponse* response) override;
  grpc::Status GetRun(grpc::ServerContext* context, const xmod::v1::GetRunRequest* request,
                      xmod::v1::GetRunResponse* response) override;
  grpc::Status ResumeRun(grpc::ServerContext* context, const xmod::v1::ResumeRunRequest* request,
                         xmod::v1::Run* response) override;
  grpc::Status CancelRun(grpc::ServerContext* context, const xmod::v1::CancelRunRequest* request,
                         xmod::v1::Run* response) override;
  grpc::Status WatchSweep(grpc::ServerContext* context, const xmod::v1::WatchSweepRequest* request,
                          grpc::ServerWriter<xmod::v1::WatchSweepEvent>* writer) override;
  grpc::Status GetMetrics(grpc::ServerContext* context, const xmod::v1::GetMetricsRequest* request,
                          xmod::v1::GetMetricsResponse* response) override;
  grpc::Status Query(grpc::ServerContext* context, const xmod::v1::QueryRequest* request,
                     xmod::v1::QueryResponse* response) override;
  grpc::Status GetFit(grpc::ServerContext* context, const xmod::v1::GetFitRequest* request,
                      xmod::v1::Fit* response) override;
  grpc::Status Predict(grpc::ServerContext* context, const xmod::v1::PredictRequest* request,
                       xmod::v1::PredictResponse* response) override;
  grpc::Status Recommend(grpc::ServerContext* context, const xmod::v1::RecommendRequest* request,
                         xmod::v1::RecommendResponse* response) override;
  grpc::Status Plan(grpc::ServerContext* context, const xmod::v1::PlanRequest* request,
                    xmod::v1::PlanResponse* response) override;
  grpc::Status CreateStudy(grpc::ServerContext* context,
                           const xmod::v1::CreateStudyRequest* request,
                           xmod::v1::Study* response) override;
  grpc::Status GetStudy(grpc::ServerContext* context, const xmod::v1::GetStudyRequest* request,
                        xmod::v1::Study* response) override;
  grpc::Status ListStudies(grpc::ServerContext* context,
                           const xmod::v1::ListStudiesRequest* request,
                           xmod::v1::ListStudiesResponse* response) override;
  grpc::Status ProposeRuns(grpc::ServerContext* context,
                           const xmod::v1::ProposeRunsRequest* request,
                           xmod::v1::DesignDecision* response) override;
  grpc::Status ListDecisions(grpc::ServerContext* context,
                             const xmod::v1::ListDecisionsRequest* request,
                             xmod::v1::ListDecisionsResponse* response) override;
  grpc::Status SelectPilot(grpc::ServerContext* context,
                           const xmod::v1::SelectPilotRequest* request,
                           xmod::v1::SelectPilotResponse* response) override;
  grpc::Status GetUsage(grpc::ServerContext* context, const xmod::v1::GetUsageRequest* request,
                        xmod::v1::GetUsageResponse* response) override;
  grpc::Status ListEvents(grpc::ServerContext* context, const xmod::v1::ListEventsRequest* request,
                          xmod::v1::ListEventsResponse* response) override;
  grpc::Status Backup(grpc::ServerContext* context, const xmod::v1::BackupRequest* request,
                      grpc::ServerWriter<xmod::v1::BackupChunk>* writer) override;

 private:
  // The most recent finished runs a forecast goes by, and how recently a worker must have
  // been heard from for its slots to count.
  static constexpr int kForecastSamples = 5000;
  static constexpr int64_t kForecastSlotsSeenMs = 10 * 60 * 1000;
  // A dry run's forecast of `runs` (sweep_forecast.h) from what the database holds.
  absl::Status Forecast(const std::vector<xmod::v1::Run>& runs, xmod::v1::SweepForecast* forecast);

  Store* const store_;
  Scheduler* const scheduler_;
  ChangeFeed* const feed_;
  CoordinatorMetrics* const metrics_;
  const CoordinatorServiceOptions options_;
  UserActions& actions_;
  StreamCaps watches_;
  StreamCaps proposals_;
  Backups backups_;
  std::atomic<bool> stopping_{false};
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_COORDINATOR_SERVICE_H_
