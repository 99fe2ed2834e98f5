// Helpers shared by the two gRPC services: the bearer-token check and the conversion of a
// handler's absl::Status into grpc::Status, counted in xmod_rpc_requests_total.
// Thread-safe.
#ifndef XMOD_COORDINATOR_SERVICE_UTIL_H_
#define XMOD_COORDINATOR_SERVICE_UTIL_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "coordinator/coordinator_metrics.h"

namespace xmod {

// Runs `handler` (returning absl::Status) after the token check, and reports the result.
template <typename Handler>
grpc::Status Serve(const char* method, const std::string& token, grpc::ServerContext* context,
                   CoordinatorMetrics* metrics, Handler&& handler);

// Counts one call and converts its status.
grpc::Status Finish(const char* method, const absl::Status& status, CoordinatorMetrics* metrics);

absl::Status CheckToken(const std::string& token, grpc::ServerContext* context);

template <typename Handler>
grpc::Status Serve(const char* method, const std::string& token, grpc::ServerContext* context,
                   CoordinatorMetrics* metrics, Handler&& handler) {
  absl::Status status = CheckToken(token, context);
  if (status.ok()) status = handler();
  return Finish(method, status, metrics);
}

}  // namespace xmod

#endif  // XMOD_COORDINATOR_SERVICE_UTIL_H_
