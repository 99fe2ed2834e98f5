// Loading GPT-2's encoder.json and vocab.bpe. encoder.json is one flat JSON object of
// string -> integer, parsed here by a small dedicated reader (no JSON dependency).
#include "data/gpt2_vocab.h"

#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace xmod {
namespace {

absl::StatusOr<std::string> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Maps code points of the byte-to-unicode alphabet back to bytes.
class ByteDecoder {
 public:
  ByteDecoder() {
    const std::array<char32_t, 256> to_unicode = Gpt2ByteToUnicode();
    for (int b = 0; b < 256; ++b) from_unicode_[to_unicode[b]] = static_cast<char>(b);
  }
  // False if `c` is not in the alphabet.
  bool Append(char32_t c, std::string* out) const {
    auto it = from_unicode_.find(c);
    if (it == from_unicode_.end()) return false;
    out->push_back(it->second);
    return true;
  }
  // Decodes a UTF-8 token string of the alphabet into bytes.
  bool DecodeUtf8(absl::string_view s, std::string* out) const {
    for (size_t i = 0; i < s.size();) {
      const unsigned char b = s[i];
      char32_t c;
      if (b < 0x80) {
        c = b;
        i += 1;
      } else if ((b & 0xE0) == 0xC0 && i + 1 < s.size()) {
        c = ((b & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
        i += 2;
      } else {
        return false;  // the alphabet lies below U+0800
      }
      if (!Append(c, out)) return false;
    }
    return true;
  }

 private:
  absl::flat_hash_map<char32_t, char> from_unicode_;
};

// Reader for encoder.json: {"token": id, ...} with JSON string escapes.
class VocabJsonReader {
 public:
  VocabJsonReader(absl::string_view json, const std::string& path, const ByteDecoder& decoder)
      : json_(json), path_(path), decoder_(decoder) {}

  absl::Status Read(absl::flat_hash_map<std::string, uint32_t>* vocab) {
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    SkipSpace();
    if (Consume('}')) return absl::OkStatus();
    while (true) {
      std::string key;
      if (absl::Status s = ReadKey(&key); !s.ok()) return s;
      SkipSpace();
      if (!Consume(':')) return Error("expected ':'");
      SkipSpace();
      uint64_t id = 0;
      size_t digits = 0;
      while (pos_ < json_.size() && json_[pos_] >= '0' && json_[pos_] <= '9' && digits < 10) {
        id = id * 10 + static_cast<uint64_t>(json_[pos_++] - '0');
        ++digits;
      }
      if (digits == 0 || id > UINT32_MAX) return Error("expected a token id");
      if (!vocab->emplace(std::move(key), static_cast<uint32_t>(id)).second) {
        return Error("duplicate token");
      }
      SkipSpace();
      if (Consume('}')) return absl::OkStatus();
      if (!Consume(',')) return Error("expected ',' or '}'");
      SkipSpace();
    }
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": offset ", pos_, ": ", what));
  }
  void SkipSpace() {
    while (pos_ < json_.size() && (json_[pos_] == ' ' || json_[pos_] == '\n' ||
                                   json_[pos_] == '\r' || json_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    if (pos_ < json_.size() && json_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Hex4(uint32_t* v) {
    if (pos_ + 4 > json_.size()) return false;
    *v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = json_[pos_++];
      *v <<= 4;
      if (h >= '0' && h <= '9')
        *v |= h - '0';
      else if (h >= 'a' && h <= 'f')
        *v |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        *v |= h - 'A' + 10;
      else
        return false;
    }
    return true;
  }
  // A JSON string of alphabet code points, decoded straight to token bytes.
  absl::Status ReadKey(std::string* bytes) {
    if (!Consume('"')) return Error("expected '\"'");
    while (pos_ < json_.size() && json_[pos_] != '"') {
      absl::Status s = json_[pos_] == '\\' ? ReadEscaped(bytes) : ReadRaw(bytes);
      if (!s.ok()) return s;
    }
    if (!Consume('"')) return Error("unterminated string");
    return absl::OkStatus();
  }
  // One escape sequence (at its backslash) of an alphabet code point.
  absl::Status ReadEscaped(std::string* bytes) {
    ++pos_;
    if (pos_ >= json_.size()) return Error("unterminated escape");
    char32_t c;
    if (absl::Status s = ReadEscapedChar(json_[pos_++], &c); !s.ok()) return s;
    if (!decoder_.Append(c, bytes)) return Error("character outside the byte alphabet");
    return absl::OkStatus();
  }
  // The code point of the escape `\e`, reading a \u escape's hex digits.
  absl::Status ReadEscapedChar(char e, char32_t* c) {
    static constexpr std::pair<char, char32_t> kSimpleEscapes[] = {
        {'"', '"'},  {'\\', '\\'}, {'/', '/'},  {'b', '\b'},
        {'f', '\f'}, {'n', '\n'},  {'r', '\r'}, {'t', '\t'},
    };
    for (const auto& [name, value] : kSimpleEscapes) {
      if (e == name) {
        *c = value;
        return absl::OkStatus();
      }
    }
    if (e != 'u') return Error("bad escape");
    uint32_t v;
    if (!Hex4(&v)) return Error("bad \\u escape");
    *c = v;
    return absl::OkStatus();
  }
  // Raw UTF-8: one code point of the alphabet (at most 2 bytes).
  absl::Status ReadRaw(std::string* bytes) {
    size_t len = (static_cast<unsigned char>(json_[pos_]) & 0xE0) == 0xC0 ? 2 : 1;
    if (!decoder_.DecodeUtf8(json_.substr(pos_, len), bytes)) {
      return Error("character outside the byte alphabet");
    }
    pos_ += len;
    return absl::OkStatus();
  }

  absl::string_view json_;
  const std::string& path_;
  const ByteDecoder& decoder_;
  size_t pos_ = 0;
};

using Vocab = absl::flat_hash_map<std::string, uint32_t>;

// The token strings indexed by id, which must be 0 .. vocab.size() - 1.
absl::StatusOr<std::vector<std::string>> TokensById(const Vocab& vocab,
                                                    const std::string& json_path) {
  std::vector<std::string> tokens(vocab.size());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [bytes, id] : vocab) {
    if (id >= tokens.size() || seen[id]) {
      return absl::InvalidArgumentError(
          absl::StrCat(json_path, ": ids are not 0..", tokens.size() - 1, " (id ", id, ")"));
    }
    tokens[id] = bytes;
    seen[id] = true;
  }
  return tokens;
}

// The id of each single-byte token; every byte must have one.
absl::StatusOr<std::array<uint32_t, 256>> ByteTokenIds(const Vocab& vocab,
                                                       const std::string& json_path) {
  std::array<uint32_t, 256> byte_ids{};
  for (int b = 0; b < 256; ++b) {
    auto it = vocab.find(std::string(1, static_cast<char>(b)));
    if (it == vocab.end()) {
      return absl::InvalidArgumentError(absl::StrCat(json_path, ": no token for byte ", b));
    }
    byte_ids[b] = it->second;
  }
  return byte_ids;
}

// vocab.bpe: a "#version" line, then "left right" per line in rank order.
absl::StatusOr<std::vector<BpeMerge>> ParseMerges(absl::string_view merges_text,
                                                  const std::string& merges_path,
                                                  const ByteDecoder& decoder, const Vocab& vocab) {
  std::vector<BpeMerge> merges;
  std::vector<absl::string_view> lines = absl::StrSplit(merges_text, '\n');
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(lines[i], absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    std::string left, right;
    if (parts.size() != 2 || !decoder.DecodeUtf8(parts[0], &left) ||
        !decoder.DecodeUtf8(parts[1], &right)) {
      return absl::InvalidArgumentError(
          absl::StrCat(merges_path, ":", i + 1, ": expected two tokens of the byte alphabet"));
    }
    auto l = vocab.find(left), r = vocab.find(right), m = vocab.find(left + right);
    if (l == vocab.end() || r == vocab.end() || m == vocab.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(merges_path, ":", i + 1, ": merge of tokens not in encoder.json"));
    }
    merges.push_back(BpeMerge{l->second, r->second, m->second});
  }
  return merges;
}

}  // namespace

std::array<char32_t, 256> Gpt2ByteToUnicode() {
  std::array<char32_t, 256> map{};
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) map[b] = printable(b) ? static_cast<char32_t>(b) : next++;
  return map;
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadGpt2Tokenizer(const std::string& dir) {
  const std::string json_path = dir + "/encoder.json";
  const std::string merges_path = dir + "/vocab.bpe";
  absl::StatusOr<std::string> json = Slurp(json_path);
  if (!json.ok()) return json.status();
  absl::StatusOr<std::string> merges_text = Slurp(merges_path);
  if (!merges_text.ok()) return merges_text.status();

  const ByteDecoder decoder;
  Vocab vocab;
  if (absl::Status s = VocabJsonReader(*json, json_path, decoder).Read(&vocab); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> tokens = TokensById(vocab, json_path);
  if (!tokens.ok()) return tokens.status();
  absl::StatusOr<std::array<uint32_t, 256>> byte_ids = ByteTokenIds(vocab, json_path);
  if (!byte_ids.ok()) return byte_ids.status();
  absl::StatusOr<std::vector<BpeMerge>> merges =
      ParseMerges(*merges_text, merges_path, decoder, vocab);
  if (!merges.ok()) return merges.status();
  absl::StatusOr<std::unique_ptr<BytePairEncoder>> encoder =
      BytePairEncoder::Create(*std::move(tokens), *byte_ids, *merges);
  if (!encoder.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(merges_path, ": ", encoder.status().message()));
  }
  return std::make_unique<BpeTokenizer>(std::move(*encoder));
}

}  // namespace xmod
