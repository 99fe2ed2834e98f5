// See service_util.h.
#include "coordinator/api/service_util.h"

#include "absl/strings/ascii.h"
#include "common/grpc_status.h"
#include "glog/logging.h"

namespace xmod {

grpc::Status Finish(const char* method, const absl::Status& status, absl::Time start,
                    CoordinatorMetrics* metrics) {
  if (metrics != nullptr) {
    metrics->ObserveRpc(method, absl::AsciiStrToUpper(absl::StatusCodeToString(status.code())),
                        absl::ToDoubleSeconds(absl::Now() - start));
  }
  if (!status.ok() && status.code() != absl::StatusCode::kInvalidArgument &&
      status.code() != absl::StatusCode::kNotFound &&
      status.code() != absl::StatusCode::kFailedPrecondition &&
      status.code() != absl::StatusCode::kResourceExhausted) {
    LOG(WARNING) << method << ": " << status;
  }
  return ToGrpcStatus(status);
}

}  // namespace xmod
