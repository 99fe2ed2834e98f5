// Tests of the training and validation token streams: windowing, deterministic shuffled
// shard order, position restore, vocabulary checks and bad globs.
#include "model/train/data_loader.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

class DataLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("data_loader_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Shard `name` holding tokens first, first + 1, ..., first + count - 1.
  void Write(const std::string& name, int first, int count) {
    std::vector<uint16_t> tokens(count);
    std::iota(tokens.begin(), tokens.end(), static_cast<uint16_t>(first));
    ASSERT_TRUE(WriteShard((dir_ / name).string(), tokens).ok());
  }
  std::string Glob(const std::string& pattern) const { return (dir_ / pattern).string(); }

  std::filesystem::path dir_;
};

TEST_F(DataLoaderTest, WindowsOverlapByOneTokenAndCoverEveryShardEachEpoch) {
  // Three shards of 9 tokens: with seq_len 4, windows at offsets 0 and 4 in each.
  Write("train_0.bin", 0, 9);
  Write("train_1.bin", 100, 9);
  Write("train_2.bin", 200, 9);
  auto loader = TrainLoader::Open(Glob("train_*.bin"), "data.train_glob", 4, 1000, 7);
  ASSERT_TRUE(loader.ok()) << loader.status();
  std::vector<int64_t> batch;
  ASSERT_TRUE((*loader)->Next(6, &batch).ok());  // one full epoch
  ASSERT_EQ(batch.size(), 30u);
  std::set<int64_t> firsts;
  for (int i = 0; i < 6; ++i) {
    firsts.insert(batch[i * 5]);
    for (int t = 1; t < 5; ++t) EXPECT_EQ(batch[i * 5 + t], batch[i * 5] + t);
  }
  EXPECT_EQ(firsts, (std::set<int64_t>{0, 4, 100, 104, 200, 204}));
  EXPECT_EQ((*loader)->position().epoch, 1);
  EXPECT_EQ((*loader)->position().offset, 0);
}

TEST_F(DataLoaderTest, OrderDependsOnSeedAndEpochAndIsAPermutation) {
  for (int s = 0; s < 8; ++s) Write("train_" + std::to_string(s) + ".bin", s * 10, 9);
  auto a = TrainLoader::Open(Glob("train_*.bin"), "data.train_glob", 4, 1000, 1);
  auto b = TrainLoader::Open(Glob("train_*.bin"), "data.train_glob", 4, 1000, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<int> order = (*a)->ShardOrder(0);
  EXPECT_EQ(order, (*a)->ShardOrder(0));
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, std::vector<int>({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_NE(order, (*a)->ShardOrder(1));
  EXPECT_NE(order, (*b)->ShardOrder(0));
}

TEST_F(DataLoaderTest, RestoredPositionContinuesTheSameStream) {
  for (int s = 0; s < 3; ++s) Write("train_" + std::to_string(s) + ".bin", s * 100, 23);
  auto a = TrainLoader::Open(Glob("train_*.bin"), "data.train_glob", 4, 1000, 3);
  ASSERT_TRUE(a.ok());
  std::vector<int64_t> first, rest, resumed;
  ASSERT_TRUE((*a)->Next(7, &first).ok());
  const DataPosition saved = (*a)->position();
  ASSERT_TRUE((*a)->Next(20, &rest).ok());

  auto b = TrainLoader::Open(Glob("train_*.bin"), "data.train_glob", 4, 1000, 3);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->SetPosition(saved).ok());
  ASSERT_TRUE((*b)->Next(20, &resumed).ok());
  EXPECT_EQ(rest, resumed);
  EXPECT_FALSE((*b)->SetPosition({0, 9, 0}).ok());
  EXPECT_FALSE((*b)->SetPosition({0, 0, 1000}).ok());
}

TEST_F(DataLoaderTest, SkipLeavesTheSamePositionAsReading) {
  // Over shard and epoch boundaries: 3 shards of 5 windows, 3 epochs' worth of windows.
  for (int s = 0; s < 3; ++s) Write("train_" + std::to_string(s) + ".bin", s * 100, 23);
  auto reader = TrainLoader::Open(Glob("train_*.bin"), "data.train_glob", 4, 1000, 3);
  auto skipper = TrainLoader::Open(Glob("train_*.bin"), "data.train_glob", 4, 1000, 3);
  ASSERT_TRUE(reader.ok() && skipper.ok());
  std::vector<int64_t> all, part;
  for (int n : {2, 7, 11, 25}) {
    ASSERT_TRUE((*reader)->Next(n, &all).ok());
    // The skipper reads the last window of each stretch only: it must be the same window.
    (*skipper)->Skip(n - 1);
    ASSERT_TRUE((*skipper)->Next(1, &part).ok());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), all.end() - 5)) << n;
    EXPECT_EQ((*skipper)->position(), (*reader)->position()) << n;
  }
  EXPECT_GE((*reader)->position().epoch, 2);
}

TEST_F(DataLoaderTest, ShortShardsAreSkipped) {
  Write("train_0.bin", 0, 3);  // shorter than one window
  Write("train_1.bin", 50, 5);
  auto loader = TrainLoader::Open(Glob("train_*.bin"), "data.train_glob", 4, 1000, 0);
  ASSERT_TRUE(loader.ok());
  std::vector<int64_t> batch;
  ASSERT_TRUE((*loader)->Next(3, &batch).ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(batch[i * 5], 50);
}

TEST_F(DataLoaderTest, TokenOutsideTheVocabularyNamesTheShard) {
  Write("train_0.bin", 0, 9);
  auto loader = TrainLoader::Open(Glob("train_*.bin"), "data.train_glob", 4, 6, 0);
  ASSERT_TRUE(loader.ok());
  std::vector<int64_t> batch;
  absl::Status status = (*loader)->Next(2, &batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("train_0.bin"));
  EXPECT_THAT(status.message(), HasSubstr("vocabulary of size 6"));
}

TEST_F(DataLoaderTest, BadGlobsNameTheField) {
  auto none = TrainLoader::Open(Glob("nothing_*.bin"), "data.train_glob", 4, 100, 0);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("data.train_glob"));
  Write("tiny.bin", 0, 4);
  auto short_only = ValidationSet::Open(Glob("tiny.bin"), "data.val_glob", 4, 100, 100);
  EXPECT_EQ(short_only.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_only.status().message(), HasSubstr("data.val_glob"));
}

TEST_F(DataLoaderTest, ValidationTakesTheFirstTokensInSortedOrder) {
  Write("val_0.bin", 0, 9);
  Write("val_1.bin", 100, 13);
  auto val = ValidationSet::Open(Glob("val_*.bin"), "data.val_glob", 4, 1000, 16);
  ASSERT_TRUE(val.ok()) << val.status();
  ASSERT_EQ((*val)->size(), 4);  // 16 tokens / seq_len 4
  std::vector<int64_t> windows;
  ASSERT_TRUE((*val)->Get(0, 4, &windows).ok());
  EXPECT_EQ(windows[0], 0);
  EXPECT_EQ(windows[5], 4);
  EXPECT_EQ(windows[10], 100);
  EXPECT_EQ(windows[15], 104);
  // Asking for more than the shards hold yields what there is.
  auto all = ValidationSet::Open(Glob("val_*.bin"), "data.val_glob", 4, 1000, 1000);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)->size(), 2 + 3);
}

}  // namespace
}  // namespace xmod
