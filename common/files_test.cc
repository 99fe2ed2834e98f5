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
  EXPECT_EQ(*Sha256File(path, 3), Sha256Hex("abc"));
}

TEST(FilesTest, Sha256ReadsOnlyARegularFileOfTheExpectedSize) {
  // A device is refused before any byte is read (reading /dev/zero would never end).
  EXPECT_EQ(Sha256File("/dev/zero").status().code(), absl::StatusCode::kFailedPrecondition);
  std::string path = TempPath("files_test_c");
  ASSERT_TRUE(WriteFileAtomic(path, "abcd").ok());
  absl::StatusOr<std::string> digest = Sha256File(path, 3);
  EXPECT_EQ(digest.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(digest.status().message(), path + ": 4 bytes, 3 recorded");
}

TEST(FilesTest, ReadSmallFileReadsNoFurtherThanItsLimit) {
  EXPECT_EQ(ReadSmallFile("/dev/zero", 64).status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string path = TempPath("files_test_small");
  ASSERT_TRUE(WriteFileAtomic(path, "abcd").ok());
  EXPECT_EQ(ReadSmallFile(path, 4).value_or("?"), "abcd");
  absl::StatusOr<std::string> big = ReadSmallFile(path, 3);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(big.status().message(), path + ": larger than the limit of 3 bytes");
  EXPECT_EQ(ReadSmallFile(path + ".absent", 4).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace xmod
