// Training and validation token streams over llm.c shards.
#include "model/train/data_loader.h"

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

// SplitMix64: a small, portable generator, so the data order does not depend on the
// standard library's distributions.
uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

absl::StatusOr<std::vector<std::unique_ptr<ShardReader>>> OpenShards(const std::string& glob,
                                                                     const std::string& field) {
  if (glob.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": empty"));
  absl::StatusOr<std::vector<std::string>> paths = ExpandGlob(glob);
  if (!paths.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": no shard matches \"", glob, "\": ", paths.status().message()));
  }
  std::vector<std::unique_ptr<ShardReader>> shards;
  for (const std::string& path : *paths) {
    absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
    if (!reader.ok()) {
      return absl::Status(reader.status().code(),
                          absl::StrCat(field, ": ", reader.status().message()));
    }
    shards.push_back(*std::move(reader));
  }
  return shards;
}

// Copies the window [offset, offset + seq_len] of `shard` to `out`, checking the vocabulary.
absl::Status CopyWindow(const ShardReader& shard, int64_t offset, int seq_len, int vocab_size,
                        int64_t* out) {
  const uint16_t* tokens = shard.tokens() + offset;
  for (int t = 0; t <= seq_len; ++t) {
    if (tokens[t] >= vocab_size) {
      return absl::DataLossError(absl::StrCat(shard.path(), ": token ", tokens[t], " at position ",
                                              offset + t, " is outside the vocabulary of size ",
                                              vocab_size));
    }
    out[t] = tokens[t];
  }
  return absl::OkStatus();
}

}  // namespace

TrainLoader::TrainLoader(std::vector<std::unique_ptr<ShardReader>> shards, int seq_len,
                         int vocab_size, uint64_t seed)
    : shards_(std::move(shards)), seq_len_(seq_len), vocab_size_(vocab_size), seed_(seed) {
  order_ = ShardOrder(0);
  // Start on the first shard of epoch 0 that holds a window.
  if (shards_[order_[0]]->size() < static_cast<size_t>(seq_len_) + 1) AdvanceShard();
}

absl::StatusOr<std::unique_ptr<TrainLoader>> TrainLoader::Open(const std::string& glob,
                                                               const std::string& field,
                                                               int seq_len, int vocab_size,
                                                               uint64_t seed) {
  if (seq_len < 1) return absl::InvalidArgumentError("training.seq_len: must be >= 1");
  absl::StatusOr<std::vector<std::unique_ptr<ShardReader>>> shards = OpenShards(glob, field);
  if (!shards.ok()) return shards.status();
  bool any_window = false;
  for (const auto& shard : *shards) {
    any_window |= shard->size() >= static_cast<size_t>(seq_len) + 1;
  }
  if (!any_window) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": no shard holds one window of seq_len + 1 = ", seq_len + 1, " tokens"));
  }
  return std::unique_ptr<TrainLoader>(
      new TrainLoader(*std::move(shards), seq_len, vocab_size, seed));
}

std::vector<int> TrainLoader::ShardOrder(int64_t epoch) const {
  std::vector<int> order(shards_.size());
  std::iota(order.begin(), order.end(), 0);
  uint64_t state = seed_ ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(epoch + 1));
  for (size_t i = order.size(); i > 1; --i) {  // Fisher-Yates
    const size_t j = SplitMix64(&state) % i;
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

void TrainLoader::AdvanceShard() {
  // Open() guaranteed that some shard holds a window, so this terminates.
  do {
    position_.offset = 0;
    if (++position_.shard >= static_cast<int64_t>(order_.size())) {
      position_.shard = 0;
      ++position_.epoch;
      order_ = ShardOrder(position_.epoch);
    }
  } while (shards_[order_[position_.shard]]->size() < static_cast<size_t>(seq_len_) + 1);
}

void TrainLoader::NextWindow() {
  position_.offset += seq_len_;
  if (static_cast<size_t>(position_.offset) + seq_len_ + 1 >
      shards_[order_[position_.shard]]->size()) {
    AdvanceShard();
  }
}

absl::Status TrainLoader::Next(int n, std::vector<int64_t>* out) {
  const int64_t row = seq_len_ + 1;
  out->resize(static_cast<size_t>(n) * row);
  for (int i = 0; i < n; ++i) {
    const ShardReader& shard = *shards_[order_[position_.shard]];
    absl::Status status =
        CopyWindow(shard, position_.offset, seq_len_, vocab_size_, out->data() + i * row);
    if (!status.ok()) return status;
    NextWindow();
  }
  return absl::OkStatus();
}

void TrainLoader::Skip(int n) {
  for (int i = 0; i < n; ++i) NextWindow();
}

absl::Status TrainLoader::SetPosition(const DataPosition& position) {
  if (position.epoch < 0 || position.shard < 0 ||
      position.shard >= static_cast<int64_t>(shards_.size()) || position.offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat("data position (epoch ", position.epoch,
                                                   ", shard ", position.shard, ") is invalid"));
  }
  std::vector<int> order = ShardOrder(position.epoch);
  if (static_cast<size_t>(position.offset) + seq_len_ + 1 >
      shards_[order[position.shard]]->size()) {
    return absl::InvalidArgumentError(absl::StrCat("data position offset ", position.offset,
                                                   " is past the end of shard ",
                                                   shards_[order[position.shard]]->path()));
  }
  position_ = position;
  order_ = std::move(order);
  return absl::OkStatus();
}

ValidationSet::ValidationSet(std::vector<std::unique_ptr<ShardReader>> shards, int seq_len,
                             int vocab_size, std::vector<Window> windows)
    : shards_(std::move(shards)),
      seq_len_(seq_len),
      vocab_size_(vocab_size),
      windows_(std::move(windows)) {}

absl::StatusOr<std::unique_ptr<ValidationSet>> ValidationSet::Open(const std::string& glob,
                                                                   const std::string& field,
                                                                   int seq_len, int vocab_size,
                                                                   int64_t tokens) {
  if (seq_len < 1) return absl::InvalidArgumentError("training.seq_len: must be >= 1");
  absl::StatusOr<std::vector<std::unique_ptr<ShardReader>>> shards = OpenShards(glob, field);
  if (!shards.ok()) return shards.status();
  const int64_t wanted = std::max<int64_t>(1, tokens / seq_len);
  std::vector<Window> windows;
  for (size_t s = 0; s < shards->size() && static_cast<int64_t>(windows.size()) < wanted; ++s) {
    const int64_t size = static_cast<int64_t>((*shards)[s]->size());
    for (int64_t offset = 0;
         offset + seq_len + 1 <= size && static_cast<int64_t>(windows.size()) < wanted;
         offset += seq_len) {
      windows.push_back({static_cast<int>(s), offset});
    }
  }
  if (windows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": no shard holds one window of seq_len + 1 = ", seq_len + 1, " tokens"));
  }
  return std::unique_ptr<ValidationSet>(
      new ValidationSet(*std::move(shards), seq_len, vocab_size, std::move(windows)));
}

absl::Status ValidationSet::Get(int64_t begin, int64_t n, std::vector<int64_t>* out) const {
  const int64_t row = seq_len_ + 1;
  out->resize(static_cast<size_t>(n) * row);
  for (int64_t i = 0; i < n; ++i) {
    const Window& w = windows_.at(begin + i);
    absl::Status status =
        CopyWindow(*shards_[w.shard], w.offset, seq_len_, vocab_size_, out->data() + i * row);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace xmod
