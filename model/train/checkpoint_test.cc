// Tests of checkpoints: exact round trip of model, optimizers, counters and RNG; checksum
// verification; shape mismatch; pruning to the last two.
#include "model/train/checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

struct NetImpl : torch::nn::Module {
  explicit NetImpl(int width) {
    fc = register_module("fc", torch::nn::Linear(width, width));
    norm = register_parameter("norm", torch::ones({width}));
    count = register_buffer("count", torch::zeros({1}));
  }
  torch::nn::Linear fc{nullptr};
  torch::Tensor norm, count;
};
TORCH_MODULE(Net);

// A model with its two optimizers, trained a few steps on random data.
struct Rig {
  explicit Rig(int width = 8)
      : net(width),
        muon({net->fc->weight}, MuonOptions()),
        adamw({net->fc->bias, net->norm}, AdamWOptions()) {}
  void Train(int steps) {
    for (int i = 0; i < steps; ++i) {
      torch::Tensor x = torch::randn({4, net->fc->weight.size(1)});
      torch::Tensor loss = (net->fc(x) * net->norm).square().mean();
      loss.backward();
      muon.Step(0.01);
      adamw.Step(0.01);
      muon.ZeroGrad();
      adamw.ZeroGrad();
      net->count.add_(1);
    }
  }
  Net net;
  Muon muon;
  AdamW adamw;
};

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::path(::testing::TempDir()) /
            ("checkpoint_test_" + std::to_string(::getpid())))
               .string();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(CheckpointTest, RoundTripRestoresEverythingExactly) {
  torch::manual_seed(1);
  Rig a;
  a.Train(3);
  TrainState state{3, 3 * 256, 1.25e9, DataPosition{2, 1, 40}};
  const std::string path = CheckpointPath(dir_, 3);
  absl::StatusOr<CheckpointInfo> info = SaveCheckpoint(path, *a.net, a.muon, a.adamw, state);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->sha256, *Sha256File(path));
  EXPECT_EQ(info->bytes, static_cast<int64_t>(std::filesystem::file_size(path)));
  torch::Tensor next_draw = torch::randn({5});  // the RNG stream after the checkpoint

  torch::manual_seed(99);  // different init and RNG position
  Rig b;
  TrainState loaded;
  ASSERT_TRUE(LoadCheckpoint(path, b.net.get(), &b.muon, &b.adamw, &loaded).ok());
  EXPECT_EQ(loaded.step, 3);
  EXPECT_EQ(loaded.tokens, 768);
  EXPECT_EQ(loaded.flops, 1.25e9);
  EXPECT_EQ(loaded.data, (DataPosition{2, 1, 40}));
  EXPECT_TRUE(torch::equal(torch::randn({5}), next_draw));
  for (const auto& p : a.net->named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value(), b.net->named_parameters()[p.key()])) << p.key();
  }
  EXPECT_TRUE(torch::equal(b.net->count, torch::full({1}, 3.0)));
  EXPECT_TRUE(torch::equal(a.muon.momentum()[0], b.muon.momentum()[0]));
  EXPECT_EQ(b.adamw.steps(), 3);

  // Both continue identically.
  torch::manual_seed(5);
  a.Train(2);
  torch::manual_seed(5);
  b.Train(2);
  EXPECT_TRUE(torch::equal(a.net->fc->weight, b.net->fc->weight));
  EXPECT_TRUE(torch::equal(a.net->norm, b.net->norm));
}

TEST_F(CheckpointTest, CorruptedFileFailsTheChecksum) {
  Rig a;
  const std::string path = CheckpointPath(dir_, 1);
  ASSERT_TRUE(SaveCheckpoint(path, *a.net, a.muon, a.adamw, TrainState()).ok());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(path) / 2));
    char c;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(path) / 2));
    c = static_cast<char>(c ^ 0x5A);
    f.write(&c, 1);
  }
  Rig b;
  TrainState state;
  absl::Status status = LoadCheckpoint(path, b.net.get(), &b.muon, &b.adamw, &state);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("checksum mismatch"));
}

TEST_F(CheckpointTest, ShapeMismatchAndMissingFile) {
  Rig a(8);
  const std::string path = CheckpointPath(dir_, 1);
  ASSERT_TRUE(SaveCheckpoint(path, *a.net, a.muon, a.adamw, TrainState()).ok());
  Rig wider(16);
  TrainState state;
  absl::Status status = LoadCheckpoint(path, wider.net.get(), &wider.muon, &wider.adamw, &state);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("model/"));
  EXPECT_TRUE(
      absl::IsNotFound(LoadCheckpoint(dir_ + "/nope.pt", a.net.get(), &a.muon, &a.adamw, &state)));
}

TEST_F(CheckpointTest, PruneKeepsTheLastTwoUpToTheCurrentStep) {
  Rig a;
  for (int step : {5, 10, 15, 20, 25}) {
    ASSERT_TRUE(
        SaveCheckpoint(CheckpointPath(dir_, step), *a.net, a.muon, a.adamw, TrainState()).ok());
  }
  // A resumed attempt at step 15: 20 and 25 belong to the superseded attempt.
  ASSERT_TRUE(PruneCheckpoints(dir_, /*current_step=*/15, /*keep=*/2).ok());
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(dir_, 20)));
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(dir_, 25) + ".sha256"));
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(dir_, 5)));
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(dir_, 5) + ".sha256"));
  EXPECT_TRUE(std::filesystem::exists(CheckpointPath(dir_, 10)));
  EXPECT_TRUE(std::filesystem::exists(CheckpointPath(dir_, 15) + ".sha256"));
}

}  // namespace
}  // namespace xmod
