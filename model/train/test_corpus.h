// Test data for the trainer's tests: a fresh temporary directory, and small llm.c shards of
// a learnable token stream (each token a fixed function of the previous one, one in eight
// random), so that a few steps of training visibly lower the loss. Test-only.
#ifndef XMOD_MODEL_TRAIN_TEST_CORPUS_H_
#define XMOD_MODEL_TRAIN_TEST_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace xmod {

// <gtest TempDir>/<prefix>_<pid>, created empty.
std::string MakeTestDir(const std::string& prefix);

// Writes one shard of `tokens` tokens for each name in `names` into `dir`, drawn from one
// stream seeded with `seed`, every token below `vocab`.
absl::Status WriteLearnableShards(const std::string& dir, const std::vector<std::string>& names,
                                  int tokens, int vocab, uint32_t seed);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_TEST_CORPUS_H_
