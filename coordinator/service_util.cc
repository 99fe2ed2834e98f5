// See service_util.h.
#include "coordinator/service_util.h"

#include "absl/strings/ascii.h"
#include "common/auth.h"
#include "common/grpc_status.h"
#include "glog/logging.h"

namespace xmod {

absl::Status CheckToken(const std::string& token, grpc::ServerContext* context) {
  return CheckBearerToken(token, *context);
}

grpc::Status Finish(const char* method, const absl::Status& status, CoordinatorMetrics* metrics) {
  if (metrics != nullptr) {
    metrics->CountRpc(method, absl::AsciiStrToUpper(absl::StatusCodeToString(status.code())));
  }
  if (!status.ok() && status.code() != absl::StatusCode::kInvalidArgument &&
      status.code() != absl::StatusCode::kNotFound &&
      status.code() != absl::StatusCode::kFailedPrecondition) {
    LOG(WARNING) << method << ": " << status;
  }
  return ToGrpcStatus(status);
}

}  // namespace xmod
