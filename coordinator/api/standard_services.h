// The standard gRPC services a cluster operator's tools expect of the coordinator:
//   grpc.health.v1.Health   gRPC's default health service: SERVING once the coordinator has
//                           started every listener (SetServing), NOT_SERVING for good after
//                           MarkNotServing (the coordinator is shutting down).
//   server reflection       grpc.reflection.v1alpha.ServerReflection, so grpcurl and grpc_cli
//                           work without the .proto files; only when asked for
//                           (--grpc_reflection).
// Neither asks for a token: health reveals only whether the coordinator serves, reflection
// the API's schema (public in proto/). A plaintext health-only listener (--health_listen)
// serves probes that speak neither TLS nor tokens, such as Kubernetes' grpc probe.
#ifndef XMOD_COORDINATOR_API_STANDARD_SERVICES_H_
#define XMOD_COORDINATOR_API_STANDARD_SERVICES_H_

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace xmod {

// Adds the health service to `builder`, and server reflection exactly when `reflection`.
void AddStandardServices(grpc::ServerBuilder* builder, bool reflection);

// A plaintext gRPC server serving only the health service (--health_listen).
class HealthListener {
 public:
  // Binds `address` and serves. UNAVAILABLE naming --health_listen when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<HealthListener>> Start(const std::string& address);
  ~HealthListener();

  int port() const { return port_; }
  grpc::Server* server() { return server_.get(); }
  // Ends every call (a Watch included) at once and stops listening.
  void Shutdown();

 private:
  HealthListener() = default;

  std::unique_ptr<grpc::Service> placeholder_;  // see standard_services.cc; outlives server_
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// Sets every health status of `server` (if not null) to SERVING or NOT_SERVING; the
// coordinator starts its servers NOT_SERVING and turns them SERVING once all is up.
void SetServing(grpc::Server* server, bool serving);

// Turns every health status of `server` (if not null) to NOT_SERVING, for good.
void MarkNotServing(grpc::Server* server);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_STANDARD_SERVICES_H_
