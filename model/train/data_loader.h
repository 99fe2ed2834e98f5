// Token data for training and evaluation, read from llm.c shards (data/shard.h).
//
// TrainLoader: each call yields `n` sequences of seq_len + 1 tokens (inputs are the first
// seq_len, targets the last seq_len). Shards are visited in an order that is a permutation
// of the sorted shard list, drawn from (seed, epoch); inside a shard, sequences start at
// offsets 0, seq_len, 2 seq_len, ... (consecutive windows share one token, as in llm.c).
// The whole state is a DataPosition (epoch, shard index in the epoch's order, offset):
// saving it in a checkpoint and restoring it reproduces the data stream exactly.
//
// ValidationSet: the first `tokens` tokens of the validation shards in sorted order, cut
// into windows the same way; identical at every evaluation.
//
// Every token handed out is checked against the vocabulary (DATA_LOSS naming the shard and
// offset otherwise). LibTorch-free. Thread-compatible.
#ifndef XMOD_MODEL_TRAIN_DATA_LOADER_H_
#define XMOD_MODEL_TRAIN_DATA_LOADER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/shard.h"

namespace xmod {

struct DataPosition {
  int64_t epoch = 0;
  int64_t shard = 0;   // index into the epoch's shard order
  int64_t offset = 0;  // token offset of the next window in that shard
  bool operator==(const DataPosition& o) const {
    return epoch == o.epoch && shard == o.shard && offset == o.offset;
  }
};

class TrainLoader {
 public:
  // Opens every shard matching `glob`. `field` names the spec field in errors
  // (e.g. "data.train_glob"). INVALID_ARGUMENT if nothing matches or no shard holds one
  // window of seq_len + 1 tokens; the shard reader's error if a shard is malformed.
  static absl::StatusOr<std::unique_ptr<TrainLoader>> Open(const std::string& glob,
                                                           const std::string& field, int seq_len,
                                                           int vocab_size, uint64_t seed);

  // Appends n x (seq_len + 1) tokens, row-major, to `out` (resized to exactly that) and
  // advances the position. DATA_LOSS naming the shard if a token >= vocab_size.
  absl::Status Next(int n, std::vector<int64_t>* out);
  // Advances the position past n windows without reading them (a data-parallel rank skips
  // the windows of the other ranks); the position afterwards equals that after Next(n).
  void Skip(int n);

  const DataPosition& position() const { return position_; }
  // Restores a position saved from a loader over the same shards and seed.
  // INVALID_ARGUMENT if it lies outside the shards.
  absl::Status SetPosition(const DataPosition& position);

  // The shard order of `epoch` (indices into the sorted shard list). For tests.
  std::vector<int> ShardOrder(int64_t epoch) const;
  size_t num_shards() const { return shards_.size(); }

 private:
  TrainLoader(std::vector<std::unique_ptr<ShardReader>> shards, int seq_len, int vocab_size,
              uint64_t seed);
  // Moves to the next shard (and epoch) with room for a window.
  void AdvanceShard();
  // Moves past the current window.
  void NextWindow();

  std::vector<std::unique_ptr<ShardReader>> shards_;  // sorted by path
  int seq_len_;
  int vocab_size_;
  uint64_t seed_;
  DataPosition position_;
  std::vector<int> order_;  // ShardOrder(position_.epoch)
};

class ValidationSet {
 public:
  // The first `tokens` tokens (at least one window) of the shards matching `glob`.
  // INVALID_ARGUMENT naming `field` if there is not even one window.
  static absl::StatusOr<std::unique_ptr<ValidationSet>> Open(const std::string& glob,
                                                             const std::string& field, int seq_len,
                                                             int vocab_size, int64_t tokens);

  // Number of windows.
  int64_t size() const { return static_cast<int64_t>(windows_.size()); }
  // Windows [begin, begin + n) as n x (seq_len + 1) tokens in `out`. DATA_LOSS naming the
  // shard if a token >= vocab_size.
  absl::Status Get(int64_t begin, int64_t n, std::vector<int64_t>* out) const;

 private:
  struct Window {
    int shard;
    int64_t offset;
  };
  ValidationSet(std::vector<std::unique_ptr<ShardReader>> shards, int seq_len, int vocab_size,
                std::vector<Window> windows);

  std::vector<std::unique_ptr<ShardReader>> shards_;
  int seq_len_;
  int vocab_size_;
  std::vector<Window> windows_;
};

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_DATA_LOADER_H_
