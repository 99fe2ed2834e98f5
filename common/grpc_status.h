// Conversion between absl::Status (used inside every module) and grpc::Status (used only in
// service classes and clients). absl codes are google.rpc codes, so the mapping is 1:1.
#ifndef XMOD_COMMON_GRPC_STATUS_H_
#define XMOD_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace xmod {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace xmod

#endif  // XMOD_COMMON_GRPC_STATUS_H_
