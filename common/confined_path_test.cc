#include "common/confined_path.h"

#include <filesystem>
#include <string>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

TEST(ConfinedPathTest, LexicallyOnlyInsideTheFolder) {
  EXPECT_TRUE(CheckPathUnder("path", "/c/s-1/r-2/ckpt.pt", "/c/s-1/r-2").ok());
  EXPECT_TRUE(CheckPathUnder("path", "/c/s-1/r-2/./sub/ckpt.pt", "/c/s-1/r-2/").ok());
  EXPECT_TRUE(CheckPathUnder("path", "c/r-2/ckpt.pt", "c/r-2").ok());
  for (const char* bad :
       {"/c/s-1/r-2", "/c/s-1/r-2/", "/c/s-1/r-3/ckpt.pt", "/c/s-1/r-22/x", "/etc/passwd",
        "/dev/zero", "/c/s-1/r-2/../r-3/ckpt.pt", "c/s-1/r-2/x", "", "/c/s-1/r-2/sub/../x"}) {
    absl::Status status = CheckPathUnder("path", bad, "/c/s-1/r-2");
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << bad;
    EXPECT_THAT(status.message(), HasSubstr("path: ")) << bad;
    EXPECT_THAT(status.message(), HasSubstr("must be a file inside /c/s-1/r-2")) << bad;
  }
}

TEST(ConfinedPathTest, OnTheFileSystemNoSymlinkEscapesAndOnlyRegularFiles) {
  namespace fs = std::filesystem;
  const std::string root = std::string(::testing::TempDir()) + "/confined";
  fs::remove_all(root);
  const std::string dir = root + "/run";
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(MakeDirs(root + "/elsewhere").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/ok.pt", "abc").ok());
  ASSERT_TRUE(WriteFileAtomic(root + "/outside.pt", "abc").ok());
  fs::create_symlink(root + "/outside.pt", dir + "/link.pt");
  fs::create_symlink(dir + "/ok.pt", dir + "/inner-link.pt");
  fs::create_directory_symlink(root + "/elsewhere", dir + "/escape");
  ASSERT_TRUE(MakeDirs(dir + "/sub").ok());

  EXPECT_TRUE(CheckFileUnder("path", dir + "/ok.pt", dir, 3).ok());
  EXPECT_TRUE(CheckFileUnder("path", dir + "/ok.pt", dir, -1).ok());
  EXPECT_TRUE(CheckFileUnder("path", dir + "/not-yet.pt", dir, 3).ok());  // not visible yet
  EXPECT_THAT(CheckFileUnder("path", dir + "/ok.pt", dir, 4).message(),
              HasSubstr("has 3 bytes, the report says 4"));
  EXPECT_THAT(CheckFileUnder("path", dir + "/link.pt", dir, 3).message(),
              HasSubstr("resolves outside"));
  EXPECT_THAT(CheckFileUnder("path", dir + "/escape/new.pt", dir, 3).message(),
              HasSubstr("resolves outside"));
  EXPECT_THAT(CheckFileUnder("path", dir + "/inner-link.pt", dir, 3).message(),
              HasSubstr("is not a regular file"));
  EXPECT_THAT(CheckFileUnder("path", dir + "/sub", dir, -1).message(),
              HasSubstr("is not a regular file"));
  // A folder this machine does not see: nothing to check here.
  EXPECT_TRUE(CheckFileUnder("path", root + "/gone/x.pt", root + "/gone", 3).ok());
}

}  // namespace
}  // namespace xmod
