// Incremental BPE training. Unique words are kept as symbol sequences with their counts;
// pair counts are maintained incrementally, with an index from each pair to the words that
// contain it and a lazy max-heap over counts (an entry may overstate its pair's count after
// a merge; popping re-checks it and re-pushes the true count). A merge touches only the
// words containing the pair.
#include "data/bpe_trainer.h"

#include <cstdint>
#include <queue>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "data/pretokenizer.h"

namespace xmod {
namespace {

uint64_t Key(uint32_t left, uint32_t right) { return (static_cast<uint64_t>(left) << 32) | right; }

struct Word {
  std::vector<uint32_t> symbols;
  int64_t count;
};

struct HeapEntry {
  int64_t count;
  uint64_t key;
  // Max-heap on count, then the smaller key first.
  bool operator<(const HeapEntry& o) const {
    return count != o.count ? count < o.count : key > o.key;
  }
};

class Trainer {
 public:
  explicit Trainer(absl::string_view text) {
    absl::flat_hash_map<absl::string_view, int64_t> counts;
    ForEachGpt2Piece(text, [&](absl::string_view piece) { ++counts[piece]; });
    words_.reserve(counts.size());
    for (const auto& [piece, count] : counts) {
      Word w{{}, count};
      w.symbols.reserve(piece.size());
      for (char c : piece) w.symbols.push_back(static_cast<unsigned char>(c));
      words_.push_back(std::move(w));
    }
    stamp_.assign(words_.size(), -1);
    for (uint32_t w = 0; w < words_.size(); ++w) {
      const std::vector<uint32_t>& s = words_[w].symbols;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t key = Key(s[i], s[i + 1]);
        pair_counts_[key] += words_[w].count;
        where_[key].push_back(w);
      }
    }
    for (const auto& [key, count] : pair_counts_) heap_.push({count, key});
  }

  // Performs one merge creating `new_id`; false if no pair occurs twice.
  bool Step(uint32_t new_id, MergePair* merge) {
    uint64_t key = 0;
    if (!PopBest(&key)) return false;
    const uint32_t left = static_cast<uint32_t>(key >> 32);
    const uint32_t right = static_cast<uint32_t>(key);
    *merge = {left, right};
    absl::flat_hash_map<uint64_t, int64_t> created;  // new pairs -> count
    std::vector<uint32_t> affected = std::move(where_[key]);
    where_.erase(key);
    for (uint32_t w : affected) {
      if (stamp_[w] == static_cast<int64_t>(new_id)) continue;  // listed twice
      stamp_[w] = new_id;
      MergeInWord(w, left, right, new_id, &created);
    }
    pair_counts_.erase(key);
    for (const auto& [k, count] : created) heap_.push({count, k});
    return true;
  }

 private:
  bool PopBest(uint64_t* key) {
    while (!heap_.empty()) {
      const HeapEntry top = heap_.top();
      heap_.pop();
      auto it = pair_counts_.find(top.key);
      const int64_t now = it == pair_counts_.end() ? 0 : it->second;
      if (now != top.count) {  // stale: the pair lost occurrences since it was pushed
        if (now > 0) heap_.push({now, top.key});
        continue;
      }
      if (now < 2) return false;
      *key = top.key;
      return true;
    }
    return false;
  }

  void MergeInWord(uint32_t w, uint32_t left, uint32_t right, uint32_t new_id,
                   absl::flat_hash_map<uint64_t, int64_t>* created) {
    std::vector<uint32_t>& s = words_[w].symbols;
    const int64_t count = words_[w].count;
    bool found = false;
    for (size_t i = 0; i + 1 < s.size() && !found; ++i) found = s[i] == left && s[i + 1] == right;
    if (!found) return;
    for (size_t i = 0; i + 1 < s.size(); ++i) Adjust(Key(s[i], s[i + 1]), -count);
    size_t out = 0;
    for (size_t i = 0; i < s.size();) {
      if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
        s[out++] = new_id;
        i += 2;
      } else {
        s[out++] = s[i++];
      }
    }
    s.resize(out);
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t k = Key(s[i], s[i + 1]);
      Adjust(k, count);
      if (s[i] == new_id || s[i + 1] == new_id) {
        (*created)[k] = pair_counts_[k];
        std::vector<uint32_t>& list = where_[k];
        if (list.empty() || list.back() != w) list.push_back(w);
      }
    }
  }

  void Adjust(uint64_t key, int64_t delta) {
    auto it = pair_counts_.find(key);
    if (it == pair_counts_.end()) {
      pair_counts_.emplace(key, delta);
    } else if ((it->second += delta) == 0) {
      pair_counts_.erase(it);
    }
  }

  std::vector<Word> words_;
  std::vector<int64_t> stamp_;  // the last merge id that processed each word
  absl::flat_hash_map<uint64_t, int64_t> pair_counts_;
  absl::flat_hash_map<uint64_t, std::vector<uint32_t>> where_;  // pair -> words (may be stale)
  std::priority_queue<HeapEntry> heap_;
};

}  // namespace

absl::StatusOr<std::vector<MergePair>> TrainBpe(absl::string_view text, int vocab_size) {
  if (vocab_size < 256 || vocab_size > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size: ", vocab_size, " is outside [256, 65536]"));
  }
  Trainer trainer(text);
  std::vector<MergePair> merges;
  for (uint32_t id = 256; id < static_cast<uint32_t>(vocab_size); ++id) {
    MergePair merge;
    if (!trainer.Step(id, &merge)) break;
    merges.push_back(merge);
  }
  return merges;
}

}  // namespace xmod
