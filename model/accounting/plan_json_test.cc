// Tests of the `xmodctl plan --output json` rendering.
#include "model/accounting/plan_json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/accounting/test_specs.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_specs::MoE;
using testing_specs::Spec;

TEST(PlanJsonTest, XModA4K8) {
  absl::StatusOr<std::string> json = PlanJson(Spec(xmod::v1::XMOD, "556M", 8, 4), 32768);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->front(), '{');
  EXPECT_EQ(json->back(), '}');
  EXPECT_THAT(*json, HasSubstr("\"layers\":161,"));
  EXPECT_THAT(*json, HasSubstr("\"layer_plan\":\"[D]x4 + ([S8]x24+[D]) + ([S8]x32+[D])x4\""));
  // 161 x 15,728,640 + 152 routers x 1024 + 2 x 50257 x 1024, exactly.
  EXPECT_THAT(*json, HasSubstr("\"total_params\":2635393024,"));
  EXPECT_THAT(*json, HasSubstr("\"active_params\":440401920,"));
  EXPECT_THAT(*json, HasSubstr("\"per_layer_params\":15728640,"));
  EXPECT_THAT(*json, HasSubstr("\"forward_flops_per_token\":3934257152,"));
  EXPECT_THAT(*json, HasSubstr("\"train_flops_per_token\":11802771456,"));
  EXPECT_THAT(*json, HasSubstr("\"phi_over_phi_dense\":0.4685"));
  EXPECT_THAT(*json, HasSubstr("\"seq_len\":32768,"));
  EXPECT_THAT(*json, HasSubstr("\"layer_kinds\":\"DDDDSSSS"));
  EXPECT_THAT(*json, Not(HasSubstr("\"experts\"")));
}

TEST(PlanJsonTest, MoEHasExpertsAndNoReferenceWithoutOne) {
  absl::StatusOr<Accounting> acc = Account(MoE("556M", 6, 64, 2), 32768);
  ASSERT_TRUE(acc.ok());
  const std::string json = AccountingToJson(*acc, nullptr);
  EXPECT_THAT(json,
              HasSubstr("\"experts\":{\"active\":6,\"total\":64,\"shared\":2,\"expert_dim\":384}"));
  EXPECT_THAT(json, HasSubstr("\"layer_plan\":\"[MoE]x28\""));
  EXPECT_THAT(json, Not(HasSubstr("phi_over_phi_dense")));
}

TEST(PlanJsonTest, PropagatesErrors) {
  absl::StatusOr<std::string> json = PlanJson(Spec(xmod::v1::XMOD, "556M", 8, 0.3), 32768);
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.status().message(), HasSubstr("a: "));
}

}  // namespace
}  // namespace xmod
