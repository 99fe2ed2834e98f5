// The tokenizer interface of xmod-data: text <-> token ids. Implementations are byte-level
// BPE encoders (bpe.h): the exact GPT-2 one (gpt2_vocab.h) and small trained vocabularies
// (bpe_file.h). OpenTokenizer (open_tokenizer.h) picks one from a command-line spec.
//
// Thread-safety: Encode is not thread-safe (encoders cache word encodings); use one
// tokenizer per thread. Decode and vocab_size are const and thread-safe.
#ifndef XMOD_DATA_TOKENIZER_H_
#define XMOD_DATA_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace xmod {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The token ids of `text` (any bytes; invalid UTF-8 is encoded byte by byte).
  virtual std::vector<uint32_t> Encode(absl::string_view text) = 0;
  // The bytes of `ids` concatenated. InvalidArgument naming the position of an id outside
  // the vocabulary.
  virtual absl::StatusOr<std::string> Decode(absl::Span<const uint32_t> ids) const = 0;
  // Number of token ids (ids are 0 .. vocab_size() - 1).
  virtual size_t vocab_size() const = 0;
};

}  // namespace xmod

#endif  // XMOD_DATA_TOKENIZER_H_
