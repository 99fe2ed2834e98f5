// GPT-2 pre-tokenization: splits text into the pieces that BPE encodes independently, as
// the reference pattern does
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (JavaScript semantics: `\s` is ECMAScript whitespace; alternatives tried in order at each
// position, the first that matches wins). Implemented by hand over UTF-8 code points; bytes
// that are not valid UTF-8 count as single "other" characters, so the pieces always cover
// the input exactly. Thread-safe pure function.
#ifndef XMOD_DATA_PRETOKENIZER_H_
#define XMOD_DATA_PRETOKENIZER_H_

#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace xmod {

// The pieces of `text` in order; their concatenation is `text`. Views point into `text`.
std::vector<absl::string_view> SplitGpt2(absl::string_view text);

// Calls `piece` on each piece of `text` in order, without collecting them.
void ForEachGpt2Piece(absl::string_view text, absl::FunctionRef<void(absl::string_view)> piece);

}  // namespace xmod

#endif  // XMOD_DATA_PRETOKENIZER_H_
