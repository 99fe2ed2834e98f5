#include "worker/gateway_client.h"

#include <chrono>

#include "common/auth.h"
#include "common/grpc_status.h"
#include "grpcpp/client_context.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

class GrpcGatewayClient : public GatewayClient {
 public:
  GrpcGatewayClient(std::shared_ptr<grpc::Channel> channel, std::string token,
                    int64_t rpc_timeout_ms)
      : stub_(v1::WorkerGateway::NewStub(channel)),
        token_(std::move(token)),
        rpc_timeout_ms_(rpc_timeout_ms) {}

  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request) override {
    return Call(&v1::WorkerGateway::Stub::Register, request, 0);
  }
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) override {
    return Call(&v1::WorkerGateway::Stub::Heartbeat, request, 0);
  }
  absl::StatusOr<v1::AcquireRunResponse> AcquireRun(const v1::AcquireRunRequest& request) override {
    return Call(&v1::WorkerGateway::Stub::AcquireRun, request, request.wait_ms());
  }
  absl::StatusOr<v1::ReportMetricsResponse> ReportMetrics(
      const v1::ReportMetricsRequest& request) override {
    return Call(&v1::WorkerGateway::Stub::ReportMetrics, request, 0);
  }
  absl::StatusOr<v1::ReportCheckpointResponse> ReportCheckpoint(
      const v1::ReportCheckpointRequest& request) override {
    return Call(&v1::WorkerGateway::Stub::ReportCheckpoint, request, 0);
  }
  absl::StatusOr<v1::FinishRunResponse> FinishRun(const v1::FinishRunRequest& request) override {
    return Call(&v1::WorkerGateway::Stub::FinishRun, request, 0);
  }

 private:
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (v1::WorkerGateway::Stub::*method)(
                                    grpc::ClientContext*, const Request&, Response*),
                                const Request& request, int64_t extra_ms) {
    grpc::ClientContext context;
    AttachBearerToken(token_, &context);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(rpc_timeout_ms_ + extra_ms));
    Response response;
    grpc::Status status = (stub_.get()->*method)(&context, request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    return response;
  }

  std::unique_ptr<v1::WorkerGateway::Stub> stub_;
  const std::string token_;
  const int64_t rpc_timeout_ms_;
};

}  // namespace

std::unique_ptr<GatewayClient> NewGrpcGatewayClient(std::shared_ptr<grpc::Channel> channel,
                                                    std::string token, int64_t rpc_timeout_ms) {
  return std::make_unique<GrpcGatewayClient>(std::move(channel), std::move(token), rpc_timeout_ms);
}

}  // namespace xmod
