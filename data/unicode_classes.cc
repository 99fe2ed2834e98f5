// UTF-8 decoding and GPT-2 character classes. Letters and numbers come from ICU's general
// category (u_charType); whitespace is ECMAScript's WhiteSpace + LineTerminator set, which
// is what the reference encoder (JavaScript `\s` with the `u` flag) uses.
#include "data/unicode_classes.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <iterator>

namespace xmod {
namespace {

// ECMAScript's WhiteSpace and LineTerminator code points outside U+2000..U+200A.
constexpr char32_t kEcmaSpaces[] = {
    0x09,  // tab
    0x0A,  // line feed
    0x0B,  // vertical tab
    0x0C,  // form feed
    0x0D,  // carriage return
    0x20, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF,
};

bool IsEcmaSpace(char32_t c) {
  if (c >= 0x2000 && c <= 0x200A) return true;
  return std::find(std::begin(kEcmaSpaces), std::end(kEcmaSpaces), c) != std::end(kEcmaSpaces);
}

bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// The length of the UTF-8 sequence a non-ASCII lead byte starts (0 when it starts none) and
// the mask of its payload bits.
struct LeadByte {
  uint8_t length;
  unsigned char payload_mask;
};

LeadByte ClassifyLead(unsigned char b0) {
  if (b0 >= 0xC2 && b0 <= 0xDF) return {2, 0x1F};
  if (b0 >= 0xE0 && b0 <= 0xEF) return {3, 0x0F};
  if (b0 >= 0xF0 && b0 <= 0xF4) return {4, 0x07};
  return {0, 0};
}

bool ContinuationsFollow(const unsigned char* s, uint8_t length) {
  for (uint8_t i = 1; i < length; ++i) {
    if (!IsContinuation(s[i])) return false;
  }
  return true;
}

// Shortest form, no surrogates, at most U+10FFFF.
bool IsScalarOfLength(char32_t c, uint8_t length) {
  constexpr char32_t kShortest[] = {0, 0, 0x80, 0x800, 0x10000};
  return c >= kShortest[length] && c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF);
}

constexpr CodePoint kInvalid{0xFFFD, 1, CharClass::kOther};

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
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  if (s[0] < 0x80) return CodePoint{s[0], 1, ClassOf(s[0])};
  const LeadByte lead = ClassifyLead(s[0]);
  if (lead.length == 0 || text.size() - pos < lead.length || !ContinuationsFollow(s, lead.length)) {
    return kInvalid;
  }
  char32_t c = s[0] & lead.payload_mask;
  for (uint8_t i = 1; i < lead.length; ++i) c = (c << 6) | (s[i] & 0x3Fu);
  if (!IsScalarOfLength(c, lead.length)) return kInvalid;
  return CodePoint{c, lead.length, ClassOf(c)};
}

}  // namespace xmod
