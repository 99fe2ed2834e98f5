#include "worker/gateway_client.h"

#include "common/auth.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

// A minimal WorkerGateway that checks the worker token and echoes what it got.
class EchoGateway : public v1::WorkerGateway::Service {
 public:
  EchoGateway() : credentials_(*CredentialSet::Parse("worker w secret-0123456789abcd", "t")) {}
  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* reply) override {
    if (auto principal = Authorize(credentials_, *context, Access::kWorker, "M"); !principal.ok()) {
      return ToGrpcStatus(principal.status());
    }
    reply->set_worker_id(request->slots_size() + 100);
    return grpc::Status::OK;
  }
  grpc::Status ReportMetrics(grpc::ServerContext* context, const v1::ReportMetricsRequest* request,
                             v1::ReportMetricsResponse* reply) override {
    if (auto principal = Authorize(credentials_, *context, Access::kWorker, "M"); !principal.ok()) {
      return ToGrpcStatus(principal.status());
    }
    reply->set_acked_seq(request->first_seq() + request->points_size() - 1);
    return grpc::Status::OK;
  }

 private:
  const CredentialSet credentials_;
};

TEST(GrpcGatewayClient, CarriesTheTokenAndConvertsStatus) {
  EchoGateway service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_GT(port, 0);
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());

  auto client = NewGrpcGatewayClient(channel, "secret-0123456789abcd");
  v1::RegisterRequest request;
  request.add_slots();
  auto reply = client->Register(request);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->worker_id(), 101);
  v1::ReportMetricsRequest metrics;
  metrics.set_first_seq(5);
  metrics.add_points();
  metrics.add_points();
  EXPECT_EQ(client->ReportMetrics(metrics)->acked_seq(), 6);

  auto wrong = NewGrpcGatewayClient(channel, "nope");
  EXPECT_EQ(wrong->Register(request).status().code(), absl::StatusCode::kUnauthenticated);
  // Not implemented by this server.
  EXPECT_EQ(client->FinishRun(v1::FinishRunRequest()).status().code(),
            absl::StatusCode::kUnimplemented);
  server->Shutdown();
}

}  // namespace
}  // namespace xmod
