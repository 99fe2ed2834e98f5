// grpc_health_probe HOST:PORT [SERVICE]: one grpc.health.v1.Health/Check over plaintext, as
// Kubernetes' grpc probe asks it, for the container test (the coordinator's health service
// through a published port). Prints the serving status; exits 0 when SERVING, 1 for any other
// status, 2 when the call fails (5 s deadline) or on a usage error.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <iostream>
#include <memory>

#include "grpc/health/v1/health.grpc.pb.h"

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: grpc_health_probe HOST:PORT [SERVICE]\n";
    return 2;
  }
  std::unique_ptr<Health::Stub> stub =
      Health::NewStub(grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  HealthCheckRequest request;
  if (argc == 3) request.set_service(argv[2]);
  HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    std::cerr << "grpc_health_probe: " << argv[1] << ": " << status.error_message() << "\n";
    return 2;
  }
  std::cout << HealthCheckResponse::ServingStatus_Name(response.status()) << "\n";
  return response.status() == HealthCheckResponse::SERVING ? 0 : 1;
}
