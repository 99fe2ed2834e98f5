// Code-point level helpers for the GPT-2 pre-tokenizer: UTF-8 decoding that tolerates
// invalid bytes, and the character classes of the reference regex (JavaScript's `\s`,
// Unicode `\p{L}` and `\p{N}`, the latter two from ICU). Thread-safe pure functions.
#ifndef XMOD_DATA_UNICODE_CLASSES_H_
#define XMOD_DATA_UNICODE_CLASSES_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace xmod {

// The class a code point has in the GPT-2 pattern.
enum class CharClass : uint8_t {
  kSpace,   // JavaScript/ECMAScript `\s`
  kLetter,  // \p{L}: Lu, Ll, Lt, Lm, Lo
  kNumber,  // \p{N}: Nd, Nl, No
  kOther,   // everything else, including bytes that are not valid UTF-8
};

struct CodePoint {
  char32_t value;  // U+FFFD for an invalid byte
  uint8_t bytes;   // length of its UTF-8 encoding in the input (1 for an invalid byte)
  CharClass cls;
};

// Decodes the code point starting at text[pos] (pos < text.size()). A byte that does not
// start a well-formed, shortest-form UTF-8 sequence decodes as one byte of class kOther,
// so every input byte belongs to exactly one code point.
CodePoint DecodeCodePoint(absl::string_view text, size_t pos);

// The class of a valid code point.
CharClass ClassOf(char32_t c);

}  // namespace xmod

#endif  // XMOD_DATA_UNICODE_CLASSES_H_
