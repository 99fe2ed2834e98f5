#include "common/proto_json.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ProtoJsonTest, ProtoFieldNamesAndDefaults) {
  xmod::v1::Fit fit;
  fit.set_sweep_id(7);
  absl::StatusOr<std::string> json = ProtoJson(fit);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"sweep_id\": \"7\""));  // int64 as a string (proto3 JSON)
  EXPECT_THAT(*json, HasSubstr("\"n_obs\": 0"));         // defaults printed
  EXPECT_THAT(*json, HasSubstr("\"at_bound\": []"));
  EXPECT_THAT(*json, Not(HasSubstr("sweepId")));
  EXPECT_EQ(json->back(), '\n');
}

TEST(ProtoJsonTest, LineLayoutIsOneLine) {
  xmod::v1::Fit fit;
  fit.set_r2(0.5);
  absl::StatusOr<std::string> json = ProtoJson(fit, JsonLayout::kLine);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->find('\n'), std::string::npos);
  EXPECT_THAT(*json, HasSubstr("\"r2\":0.5"));
}

}  // namespace
}  // namespace xmod
