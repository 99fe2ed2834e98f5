// WorkerGatewayService: the worker API (xmod.v1.WorkerGateway, proto/xmod/v1/worker.proto),
// a thin layer over the Scheduler and the MetricIngest. AcquireRun long-polls for at most
// min(wait_ms, max_wait_ms, the call's deadline). Every RPC needs a worker credential
// (common/auth.h) and is bound to that worker's identity (worker_identity.h): a worker may register
// only under its credential's name, and may heartbeat, acquire and report only as itself and only
// for its own attempts (PERMISSION_DENIED otherwise). Every request is held to the limits of
// worker_request_limits.h before the scheduler sees it. Thread-safe.
#ifndef XMOD_COORDINATOR_API_WORKER_GATEWAY_SERVICE_H_
#define XMOD_COORDINATOR_API_WORKER_GATEWAY_SERVICE_H_

#include <memory>
#include <string>

#include "common/credentials.h"
#include "coordinator/api/worker_identity.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/scheduling/metric_ingest.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/store/store.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {

struct WorkerGatewayOptions {
  // Who may call; empty = everyone (anonymous). Never null.
  std::shared_ptr<const CredentialSet> credentials = std::make_shared<CredentialSet>();
  int64_t max_wait_ms = 60000;  // longest AcquireRun long-poll
};

class WorkerGatewayService final : public xmod::v1::WorkerGateway::Service {
 public:
  // `scheduler`, `ingest` (metric points) and `store` (for worker identities) must outlive
  // the service; `metrics` may be null.
  WorkerGatewayService(Scheduler* scheduler, MetricIngest* ingest, Store* store,
                       CoordinatorMetrics* metrics, WorkerGatewayOptions options);

  grpc::Status Register(grpc::ServerContext* context, const xmod::v1::RegisterRequest* request,
                        xmod::v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const xmod::v1::HeartbeatRequest* request,
                         xmod::v1::HeartbeatResponse* response) override;
  grpc::Status AcquireRun(grpc::ServerContext* context, const xmod::v1::AcquireRunRequest* request,
                          xmod::v1::AcquireRunResponse* response) override;
  grpc::Status ReportMetrics(grpc::ServerContext* context,
                             const xmod::v1::ReportMetricsRequest* request,
                             xmod::v1::ReportMetricsResponse* response) override;
  grpc::Status ReportCheckpoint(grpc::ServerContext* context,
                                const xmod::v1::ReportCheckpointRequest* request,
                                xmod::v1::ReportCheckpointResponse* response) override;
  grpc::Status FinishRun(grpc::ServerContext* context, const xmod::v1::FinishRunRequest* request,
                         xmod::v1::FinishRunResponse* response) override;

 private:
  Scheduler* const scheduler_;
  MetricIngest* const ingest_;
  CoordinatorMetrics* const metrics_;
  const WorkerGatewayOptions options_;
  WorkerIdentity identity_;
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_WORKER_GATEWAY_SERVICE_H_
