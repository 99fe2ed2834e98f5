// Helpers shared by the two gRPC services: authentication and the scope check of each call
// (common/auth.h), and the conversion of a handler's absl::Status into grpc::Status, counted
// in xmod_rpc_requests_total and timed in xmod_rpc_duration_seconds; a failed call carries
// the coordinator's status origin (common/status_origin.h). Thread-safe.
#ifndef XMOD_COORDINATOR_API_SERVICE_UTIL_H_
#define XMOD_COORDINATOR_API_SERVICE_UTIL_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/credentials.h"
#include "common/status_origin.h"
#include "coordinator/metrics/coordinator_metrics.h"

namespace xmod {

// Authorizes the call for `access`, then runs `handler` — with the caller's Principal when it
// takes one — and reports the result.
template <typename Handler>
grpc::Status Serve(const char* method, Access access, const CredentialSet& credentials,
                   grpc::ServerContext* context, CoordinatorMetrics* metrics, Handler&& handler);

// Counts one call that began at `start` and converts its status.
grpc::Status Finish(const char* method, const absl::Status& status, absl::Time start,
                    CoordinatorMetrics* metrics);

template <typename Handler>
grpc::Status Serve(const char* method, Access access, const CredentialSet& credentials,
                   grpc::ServerContext* context, CoordinatorMetrics* metrics, Handler&& handler) {
  const absl::Time start = absl::Now();
  absl::StatusOr<Principal> principal = Authorize(credentials, *context, access, method);
  absl::Status status = principal.status();
  if (status.ok()) {
    if constexpr (std::is_invocable_v<Handler, const Principal&>) {
      status = handler(*principal);
    } else {
      status = handler();
    }
  }
  if (!status.ok()) context->AddTrailingMetadata(kStatusOriginKey, kStatusOriginCoordinator);
  return Finish(method, status, start, metrics);
}

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_SERVICE_UTIL_H_
