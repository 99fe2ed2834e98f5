// Tests of the llm.c shard format: round trip, truncation, bad magic/version, globbing.
#include "data/shard.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::path(::testing::TempDir()) / ("shard_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes raw bytes: a header built from `ints` then `tokens`.
  void WriteRaw(const std::string& path, std::array<int32_t, 3> ints,
                const std::vector<uint16_t>& tokens) {
    std::array<int32_t, kShardHeaderInts> header{};
    header[0] = ints[0];
    header[1] = ints[1];
    header[2] = ints[2];
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), kShardHeaderBytes);
    out.write(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
  }

  std::filesystem::path dir_;
};

TEST_F(ShardTest, RoundTrip) {
  std::vector<uint16_t> tokens(1000);
  std::iota(tokens.begin(), tokens.end(), 65000);  // wraps past 65535: all uint16 values ok
  const std::string path = Path("a.bin");
  ASSERT_TRUE(WriteShard(path, tokens).ok());
  EXPECT_EQ(std::filesystem::file_size(path), kShardHeaderBytes + 2 * tokens.size());

  absl::StatusOr<ShardHeader> header = ReadShardHeader(path);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->magic, kShardMagic);
  EXPECT_EQ(header->version, kShardVersion);
  EXPECT_EQ(header->num_tokens, 1000);

  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ((*reader)->size(), tokens.size());
  EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), (*reader)->tokens()));
  EXPECT_EQ((*reader)->tokens()[600], 64);  // 65000 + 600 - 65536
}

TEST_F(ShardTest, EmptyShardRoundTrips) {
  const std::string path = Path("empty.bin");
  ASSERT_TRUE(WriteShard(path, {}).ok());
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->size(), 0u);
}

TEST_F(ShardTest, WriteReplacesAndLeavesNoTempFile) {
  const std::string path = Path("b.bin");
  ASSERT_TRUE(WriteShard(path, std::vector<uint16_t>{1, 2, 3}).ok());
  ASSERT_TRUE(WriteShard(path, std::vector<uint16_t>{7, 8}).ok());
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_THAT((*reader)->span(), ElementsAre(7, 8));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(ShardTest, TruncatedFileIsRefusedWithCounts) {
  const std::string path = Path("short.bin");
  WriteRaw(path, {kShardMagic, kShardVersion, 100}, std::vector<uint16_t>(50, 1));
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(reader.status().message(), HasSubstr(path));
  EXPECT_THAT(reader.status().message(),
              HasSubstr("truncated: header says 100 tokens, file holds 50"));
  // The header alone is fine.
  EXPECT_TRUE(ReadShardHeader(path).ok());
}

TEST_F(ShardTest, TrailingDataIsRefused) {
  const std::string path = Path("long.bin");
  WriteRaw(path, {kShardMagic, kShardVersion, 2}, std::vector<uint16_t>(3, 1));
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_THAT(reader.status().message(),
              HasSubstr("trailing data: header says 2 tokens, file holds 3"));
}

TEST_F(ShardTest, FileShorterThanHeaderIsRefused) {
  const std::string path = Path("tiny.bin");
  std::ofstream(path, std::ios::binary) << "abc";
  absl::StatusOr<ShardHeader> header = ReadShardHeader(path);
  ASSERT_FALSE(header.ok());
  EXPECT_EQ(header.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(header.status().message(), HasSubstr("truncated header"));
}

TEST_F(ShardTest, WrongMagicIsRefused) {
  const std::string path = Path("magic.bin");
  WriteRaw(path, {123, kShardVersion, 2}, {1, 2});
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(reader.status().message(), HasSubstr(path + ": bad magic 123 (want 20240520)"));
  EXPECT_FALSE(ReadShardHeader(path).ok());
}

TEST_F(ShardTest, WrongVersionIsRefused) {
  const std::string path = Path("version.bin");
  WriteRaw(path, {kShardMagic, 2, 2}, {1, 2});
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_THAT(reader.status().message(), HasSubstr("unsupported version 2 (want 1)"));
}

TEST_F(ShardTest, MissingFileIsNotFound) {
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(Path("none.bin"));
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(reader.status().message(), HasSubstr("none.bin"));
}

TEST_F(ShardTest, GlobIsSortedAndEmptyGlobIsNotFound) {
  for (const char* name : {"d_train_002.bin", "d_train_000.bin", "d_train_001.bin"}) {
    ASSERT_TRUE(WriteShard(Path(name), std::vector<uint16_t>{1}).ok());
  }
  absl::StatusOr<std::vector<std::string>> paths = ExpandGlob(Path("d_train_*.bin"));
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_THAT(*paths, ElementsAre(Path("d_train_000.bin"), Path("d_train_001.bin"),
                                  Path("d_train_002.bin")));

  const std::string pattern = Path("d_val_*.bin");
  absl::StatusOr<std::vector<std::string>> none = ExpandGlob(pattern);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr(pattern));
}

}  // namespace
}  // namespace xmod
