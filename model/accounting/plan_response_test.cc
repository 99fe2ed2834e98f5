// Tests of the accounting as xmod.v1.PlanResponse (Plan RPC and `xmodctl plan`).
#include "model/accounting/plan_response.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/accounting/test_specs.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;
using testing_specs::MoE;
using testing_specs::Spec;

TEST(PlanResponseTest, XModA4K8) {
  absl::StatusOr<xmod::v1::PlanResponse> plan =
      PlanModel(Spec(xmod::v1::XMOD, "556M", 8, 4), 32768);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->layers(), 161);
  EXPECT_EQ(plan->layer_plan(), "[D]x4 + ([S8]x24+[D]) + ([S8]x32+[D])x4");
  // 161 x 15,728,640 + 152 routers x 1024 + 2 x 50257 x 1024, exactly.
  EXPECT_EQ(plan->total_params(), 2635393024.0);
  EXPECT_EQ(plan->active_params(), 440401920.0);
  EXPECT_EQ(plan->per_layer_params(), 15728640.0);
  EXPECT_EQ(plan->forward_flops_per_token(), 3934257152.0);
  EXPECT_EQ(plan->train_flops_per_token(), 11802771456.0);
  EXPECT_NEAR(plan->phi_over_phi_dense(), 0.4685, 5e-5);
  EXPECT_EQ(plan->seq_len(), 32768);
  EXPECT_EQ(plan->backbone().d_model(), 1024);
  EXPECT_THAT(plan->layer_kinds(), ::testing::StartsWith("DDDDSSSS"));
  EXPECT_FALSE(plan->has_experts());
}

TEST(PlanResponseTest, MoEHasExperts) {
  absl::StatusOr<xmod::v1::PlanResponse> plan = PlanModel(MoE("556M", 6, 64, 2), 32768);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->layer_plan(), "[MoE]x28");
  EXPECT_EQ(plan->experts().active_experts(), 6);
  EXPECT_EQ(plan->experts().total_experts(), 64);
  EXPECT_EQ(plan->experts().shared_experts(), 2);
  EXPECT_EQ(plan->experts().expert_dim(), 384);
}

TEST(PlanResponseTest, PropagatesErrors) {
  absl::StatusOr<xmod::v1::PlanResponse> plan =
      PlanModel(Spec(xmod::v1::XMOD, "556M", 8, 0.3), 32768);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("a: "));
}

}  // namespace
}  // namespace xmod
