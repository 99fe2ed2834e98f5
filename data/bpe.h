// Byte-level BPE: the merge loop shared by the GPT-2 and the small tokenizers. A word (one
// pre-tokenizer piece) starts as one token per byte; the adjacent pair with the lowest merge
// rank is merged everywhere in the word, left to right, until no adjacent pair has a rank
// (the algorithm of GPT-2's encoder.py, on token ids instead of strings).
//
// Thread-safety: BytePairEncoder::EncodeWord and BpeTokenizer::Encode fill a cache and are
// not thread-safe; everything else is const.
#ifndef XMOD_DATA_BPE_H_
#define XMOD_DATA_BPE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/tokenizer.h"

namespace xmod {

// One merge rule: tokens `left` and `right`, adjacent, become `merged`.
struct BpeMerge {
  uint32_t left;
  uint32_t right;
  uint32_t merged;
};

class BytePairEncoder {
 public:
  // `tokens[id]` are the bytes of token id; `byte_ids[b]` is the token of the single byte b;
  // `merges` in rank order (rank = index). InvalidArgument if an id is out of range, a byte
  // token does not hold its byte, a merge's result is not the concatenation of its parts, or
  // a pair is listed twice.
  static absl::StatusOr<std::unique_ptr<BytePairEncoder>> Create(
      std::vector<std::string> tokens, const std::array<uint32_t, 256>& byte_ids,
      const std::vector<BpeMerge>& merges);

  // Appends the tokens of `word` to `out`.
  void EncodeWord(absl::string_view word, std::vector<uint32_t>* out);

  size_t vocab_size() const { return tokens_.size(); }
  const std::string& token_bytes(uint32_t id) const { return tokens_[id]; }

 private:
  struct Rule {
    uint32_t rank;
    uint32_t merged;
  };
  static uint64_t Key(uint32_t left, uint32_t right) {
    return (static_cast<uint64_t>(left) << 32) | right;
  }

  BytePairEncoder() = default;
  void MergeLoop(std::vector<uint32_t>* symbols) const;

  std::vector<std::string> tokens_;
  std::array<uint32_t, 256> byte_ids_{};
  absl::flat_hash_map<uint64_t, Rule> rules_;
  absl::flat_hash_map<std::string, std::vector<uint32_t>> cache_;  // word -> its tokens
};

// A Tokenizer: GPT-2 pre-tokenization (pretokenizer.h), then BPE on each piece.
class BpeTokenizer : public Tokenizer {
 public:
  explicit BpeTokenizer(std::unique_ptr<BytePairEncoder> encoder) : encoder_(std::move(encoder)) {}

  std::vector<uint32_t> Encode(absl::string_view text) override;
  absl::StatusOr<std::string> Decode(absl::Span<const uint32_t> ids) const override;
  size_t vocab_size() const override { return encoder_->vocab_size(); }

  // Appends the tokens of `text` to `out` (Encode without the allocation).
  void EncodeTo(absl::string_view text, std::vector<uint32_t>* out);

 private:
  std::unique_ptr<BytePairEncoder> encoder_;
};

}  // namespace xmod

#endif  // XMOD_DATA_BPE_H_
