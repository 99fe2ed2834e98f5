#include "common/build_info.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(BuildInfoTest, VersionLine) {
  EXPECT_FALSE(BuildVersion().empty());
  EXPECT_FALSE(BuildGitSha().empty());
  EXPECT_EQ(VersionLine("xmodctl"), absl::StrCat("xmodctl ", BuildVersion(), " (git ",
                                                 BuildGitSha(), ", ", BuildType(), ")"));
  EXPECT_THAT(VersionLine("xmod-train", "LibTorch 2.1.0"),
              ::testing::EndsWith(", LibTorch 2.1.0)"));
}

}  // namespace
}  // namespace xmod
