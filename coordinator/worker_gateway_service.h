// WorkerGatewayService: the worker API (xmod.v1.WorkerGateway, proto/xmod/v1/worker.proto),
// a thin layer over the Scheduler. AcquireRun long-polls for at most min(wait_ms,
// max_wait_ms, the call's deadline). Every RPC checks the bearer token when one is set.
// Thread-safe.
#ifndef XMOD_COORDINATOR_WORKER_GATEWAY_SERVICE_H_
#define XMOD_COORDINATOR_WORKER_GATEWAY_SERVICE_H_

#include <string>

#include "coordinator/coordinator_metrics.h"
#include "coordinator/scheduler.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {

struct WorkerGatewayOptions {
  std::string token;
  int64_t max_wait_ms = 60000;  // longest AcquireRun long-poll
};

class WorkerGatewayService final : public xmod::v1::WorkerGateway::Service {
 public:
  // `scheduler` must outlive the service; `metrics` may be null.
  WorkerGatewayService(Scheduler* scheduler, CoordinatorMetrics* metrics,
                       WorkerGatewayOptions options);

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
  CoordinatorMetrics* const metrics_;
  const WorkerGatewayOptions options_;
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_WORKER_GATEWAY_SERVICE_H_
