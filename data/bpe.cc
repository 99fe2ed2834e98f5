// Byte-level BPE merge loop with a per-word cache, and the BpeTokenizer built on it.
#include "data/bpe.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "data/pretokenizer.h"

namespace xmod {
namespace {

// Words longer than this are encoded without caching (long runs are rare and unique).
constexpr size_t kMaxCachedWordBytes = 64;
// The cache is dropped when it reaches this many words, bounding memory on huge corpora.
constexpr size_t kMaxCachedWords = 1 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<BytePairEncoder>> BytePairEncoder::Create(
    std::vector<std::string> tokens, const std::array<uint32_t, 256>& byte_ids,
    const std::vector<BpeMerge>& merges) {
  const size_t n = tokens.size();
  for (int b = 0; b < 256; ++b) {
    if (byte_ids[b] >= n || tokens[byte_ids[b]] != std::string(1, static_cast<char>(b))) {
      return absl::InvalidArgumentError(
          absl::StrCat("byte_ids[", b, "]: token ", byte_ids[b], " is not the byte ", b));
    }
  }
  std::unique_ptr<BytePairEncoder> encoder(new BytePairEncoder());
  encoder->rules_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const BpeMerge& m = merges[rank];
    if (m.left >= n || m.right >= n || m.merged >= n) {
      return absl::InvalidArgumentError(absl::StrCat("merges[", rank, "]: token id out of range (",
                                                     m.left, ", ", m.right, " -> ", m.merged,
                                                     "; vocabulary has ", n, ")"));
    }
    if (tokens[m.merged] != tokens[m.left] + tokens[m.right]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "merges[", rank, "]: token ", m.merged, " is not token ", m.left, " + token ", m.right));
    }
    if (!encoder->rules_.emplace(Key(m.left, m.right), Rule{static_cast<uint32_t>(rank), m.merged})
             .second) {
      return absl::InvalidArgumentError(
          absl::StrCat("merges[", rank, "]: pair (", m.left, ", ", m.right, ") listed twice"));
    }
  }
  encoder->tokens_ = std::move(tokens);
  encoder->byte_ids_ = byte_ids;
  return encoder;
}

void BytePairEncoder::MergeLoop(std::vector<uint32_t>* symbols) const {
  std::vector<uint32_t>& s = *symbols;
  while (s.size() > 1) {
    // The adjacent pair with the lowest rank.
    uint32_t best_rank = std::numeric_limits<uint32_t>::max();
    uint32_t left = 0, right = 0, merged = 0;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      auto it = rules_.find(Key(s[i], s[i + 1]));
      if (it != rules_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        left = s[i];
        right = s[i + 1];
        merged = it->second.merged;
      }
    }
    if (best_rank == std::numeric_limits<uint32_t>::max()) return;
    // Merge every occurrence, scanning left to right without overlap.
    size_t out = 0;
    for (size_t i = 0; i < s.size();) {
      if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
        s[out++] = merged;
        i += 2;
      } else {
        s[out++] = s[i++];
      }
    }
    s.resize(out);
  }
}

void BytePairEncoder::EncodeWord(absl::string_view word, std::vector<uint32_t>* out) {
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<uint32_t> symbols;
  symbols.reserve(word.size());
  for (char c : word) symbols.push_back(byte_ids_[static_cast<unsigned char>(c)]);
  MergeLoop(&symbols);
  out->insert(out->end(), symbols.begin(), symbols.end());
  if (cacheable) {
    if (cache_.size() >= kMaxCachedWords) cache_.clear();
    cache_.emplace(std::string(word), std::move(symbols));
  }
}

void BpeTokenizer::EncodeTo(absl::string_view text, std::vector<uint32_t>* out) {
  ForEachGpt2Piece(text, [&](absl::string_view piece) { encoder_->EncodeWord(piece, out); });
}

std::vector<uint32_t> BpeTokenizer::Encode(absl::string_view text) {
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3);
  EncodeTo(text, &ids);
  return ids;
}

absl::StatusOr<std::string> BpeTokenizer::Decode(absl::Span<const uint32_t> ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= encoder_->vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ids[", i, "]: ", ids[i], " is outside the vocabulary of ", encoder_->vocab_size()));
    }
    text += encoder_->token_bytes(ids[i]);
  }
  return text;
}

}  // namespace xmod
