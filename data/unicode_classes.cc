// UTF-8 decoding and GPT-2 character classes. Letters and numbers come from ICU's general
// category (u_charType); whitespace is ECMAScript's WhiteSpace + LineTerminator set, which
// is what the reference encoder (JavaScript `\s` with the `u` flag) uses.
#include "data/unicode_classes.h"

#include <unicode/uchar.h>

namespace xmod {
namespace {

bool IsEcmaSpace(char32_t c) {
  switch (c) {
    case 0x09:  // tab
    case 0x0A:  // line feed
    case 0x0B:  // vertical tab
    case 0x0C:  // form feed
    case 0x0D:  // carriage return
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

}  // namespace

CharClass ClassOf(char32_t c) {
  if (c < 0x80) {  // fast path for ASCII
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return CharClass::kSpace;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return CharClass::kLetter;
    if (c >= '0' && c <= '9') return CharClass::kNumber;
    return CharClass::kOther;
  }
  if (IsEcmaSpace(c)) return CharClass::kSpace;
  const uint32_t mask = U_GET_GC_MASK(static_cast<UChar32>(c));
  if (mask & U_GC_L_MASK) return CharClass::kLetter;
  if (mask & U_GC_N_MASK) return CharClass::kNumber;
  return CharClass::kOther;
}

CodePoint DecodeCodePoint(absl::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t left = text.size() - pos;
  const unsigned char b0 = s[pos];
  char32_t c = 0;
  uint8_t n = 0;
  if (b0 < 0x80) {
    c = b0;
    n = 1;
  } else if (b0 >= 0xC2 && b0 <= 0xDF && left >= 2 && IsContinuation(s[pos + 1])) {
    c = ((b0 & 0x1Fu) << 6) | (s[pos + 1] & 0x3Fu);
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF && left >= 3 && IsContinuation(s[pos + 1]) &&
             IsContinuation(s[pos + 2])) {
    c = ((b0 & 0x0Fu) << 12) | ((s[pos + 1] & 0x3Fu) << 6) | (s[pos + 2] & 0x3Fu);
    if (c >= 0x800 && (c < 0xD800 || c > 0xDFFF)) n = 3;  // shortest form, no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4 && left >= 4 && IsContinuation(s[pos + 1]) &&
             IsContinuation(s[pos + 2]) && IsContinuation(s[pos + 3])) {
    c = ((b0 & 0x07u) << 18) | ((s[pos + 1] & 0x3Fu) << 12) | ((s[pos + 2] & 0x3Fu) << 6) |
        (s[pos + 3] & 0x3Fu);
    if (c >= 0x10000 && c <= 0x10FFFF) n = 4;
  }
  if (n == 0) return CodePoint{0xFFFD, 1, CharClass::kOther};
  return CodePoint{c, n, ClassOf(c)};
}

}  // namespace xmod
