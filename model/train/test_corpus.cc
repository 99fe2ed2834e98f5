#include "model/train/test_corpus.h"

#include <unistd.h>

#include <filesystem>
#include <random>

#include "data/shard.h"
#include "gtest/gtest.h"

namespace xmod {

std::string MakeTestDir(const std::string& prefix) {
  std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / (prefix + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

absl::Status WriteLearnableShards(const std::string& dir, const std::vector<std::string>& names,
                                  int tokens, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  for (const std::string& name : names) {
    std::vector<uint16_t> shard(tokens);
    uint16_t t = 1;
    for (uint16_t& out : shard) {
      t = rng() % 8 == 0 ? rng() % vocab : (t * 5 + 3) % vocab;
      out = t;
    }
    if (absl::Status s = WriteShard(dir + "/" + name, shard); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace xmod
