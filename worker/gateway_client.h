// GatewayClient: the worker's view of the coordinator's WorkerGateway service
// (proto/xmod/v1/worker.proto). The agent and the metric relay talk to this interface, so
// tests drive them with a scripted fake (fake_gateway.h) instead of a coordinator; the gRPC
// implementation wraps a stub on an injected channel and attaches the bearer token.
//
// Thread-safety: implementations are safe to call from several threads at once.
#ifndef XMOD_WORKER_GATEWAY_CLIENT_H_
#define XMOD_WORKER_GATEWAY_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

class GatewayClient {
 public:
  virtual ~GatewayClient() = default;
  // Each call returns the reply, or the RPC's status (UNAVAILABLE when the coordinator
  // cannot be reached, DEADLINE_EXCEEDED on timeout, the server's code otherwise).
  virtual absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request) = 0;
  virtual absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) = 0;
  // Blocks up to request.wait_ms (plus the RPC timeout).
  virtual absl::StatusOr<v1::AcquireRunResponse> AcquireRun(
      const v1::AcquireRunRequest& request) = 0;
  virtual absl::StatusOr<v1::ReportMetricsResponse> ReportMetrics(
      const v1::ReportMetricsRequest& request) = 0;
  virtual absl::StatusOr<v1::ReportCheckpointResponse> ReportCheckpoint(
      const v1::ReportCheckpointRequest& request) = 0;
  virtual absl::StatusOr<v1::FinishRunResponse> FinishRun(const v1::FinishRunRequest& request) = 0;
};

// A client over `channel`. Every call carries "authorization: Bearer <token>" when `token` is
// non-empty and a deadline of `rpc_timeout_ms` (AcquireRun: its wait_ms on top).
std::unique_ptr<GatewayClient> NewGrpcGatewayClient(std::shared_ptr<grpc::Channel> channel,
                                                    std::string token,
                                                    int64_t rpc_timeout_ms = 10'000);

}  // namespace xmod

#endif  // XMOD_WORKER_GATEWAY_CLIENT_H_
