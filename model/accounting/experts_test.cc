// Tests of the MoE "active:total+shared" notation and its validation.
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/accounting/accounting.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

TEST(ExpertsTest, ParsesPaperNotation) {
  xmod::v1::MoESpec moe;
  moe.set_expert_dim(384);
  ASSERT_TRUE(ParseExperts("6:64+2", &moe).ok());
  EXPECT_EQ(moe.active_experts(), 6);
  EXPECT_EQ(moe.total_experts(), 64);
  EXPECT_EQ(moe.shared_experts(), 2);
  EXPECT_EQ(moe.expert_dim(), 384);  // left alone
  ASSERT_TRUE(ParseExperts("8:128", &moe).ok());
  EXPECT_EQ(moe.active_experts(), 8);
  EXPECT_EQ(moe.total_experts(), 128);
  EXPECT_EQ(moe.shared_experts(), 0);
}

TEST(ExpertsTest, RejectsBadText) {
  xmod::v1::MoESpec moe;
  for (const char* text :
       {"", "6", "6:", ":64", "6:64+", "a:64", "6:-64", "6:64+2+1", "+6:64", "6 :64", "6:64+x"}) {
    const absl::Status s = ParseExperts(text, &moe);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(s.message(), HasSubstr("experts: ")) << text;
  }
}

TEST(ExpertsTest, ResolvesDefaultExpertDim) {
  xmod::v1::BackboneSpec spec;
  spec.set_name("936M");
  absl::StatusOr<Backbone> b = ResolveBackbone(spec);
  ASSERT_TRUE(b.ok());
  xmod::v1::MoESpec moe;
  ASSERT_TRUE(ParseExperts("6:128+2", &moe).ok());
  absl::StatusOr<Experts> e = ResolveExperts(moe, *b);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->expert_dim, 480);  // Table 6, 936M
  EXPECT_EQ(e->total, 128);

  ASSERT_TRUE(ParseExperts("8:6+2", &moe).ok());
  e = ResolveExperts(moe, *b);
  EXPECT_THAT(e.status().message(), HasSubstr("moe.total_experts: "));
  ASSERT_TRUE(ParseExperts("6:64+2", &moe).ok());
  moe.set_expert_dim(-1);
  EXPECT_THAT(ResolveExperts(moe, *b).status().message(), HasSubstr("moe.expert_dim: "));
}

}  // namespace
}  // namespace xmod
