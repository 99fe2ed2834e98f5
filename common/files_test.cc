#include "common/files.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace xmod {
namespace {

std::string TempPath(const std::string& name) {
  return std::string(::testing::TempDir()) + "/" + name;
}

TEST(FilesTest, AtomicWriteThenRead) {
  std::string path = TempPath("files_test_a");
  ASSERT_TRUE(WriteFileAtomic(path, "hello").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "world!").ok());
  auto contents = ReadFile(path);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(*contents, "world!");
}

TEST(FilesTest, MissingFileIsNotFound) {
  auto contents = ReadFile(TempPath("does_not_exist"));
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kNotFound);
}

TEST(FilesTest, Sha256MatchesKnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string path = TempPath("files_test_b");
  ASSERT_TRUE(WriteFileAtomic(path, "abc").ok());
  auto digest = Sha256File(path);
  ASSERT_TRUE(digest.ok());
  EXPECT_EQ(*digest, Sha256Hex("abc"));
}

}  // namespace
}  // namespace xmod
