#include "common/grpc_status.h"

#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(GrpcStatusTest, RoundTripsCodeAndMessage) {
  absl::Status status = absl::InvalidArgumentError("grids[0].ks[1]: K must be >= 1");
  grpc::Status converted = ToGrpcStatus(status);
  EXPECT_EQ(converted.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(converted.error_message(), "grids[0].ks[1]: K must be >= 1");
  EXPECT_EQ(FromGrpcStatus(converted), status);
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace xmod
