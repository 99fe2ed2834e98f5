#include "common/grpc_status.h"

#include "common/auth.h"
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

TEST(AuthTest, EmptyExpectedTokenAcceptsAnything) {
  EXPECT_TRUE(CheckBearerToken("", std::nullopt).ok());
}

TEST(AuthTest, RejectsMissingOrWrongToken) {
  EXPECT_EQ(CheckBearerToken("s3cret", std::nullopt).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckBearerToken("s3cret", std::string("Bearer nope")).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(CheckBearerToken("s3cret", std::string("Bearer s3cret")).ok());
}

}  // namespace
}  // namespace xmod
