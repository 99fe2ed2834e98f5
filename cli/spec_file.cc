// Spec files (see spec_file.h). Text format errors come with positions from protobuf's
// ErrorCollector. Protobuf's JSON parser reports no positions, so JSON is first checked by a
// small syntax scanner that does; errors the scanner cannot see (unknown fields, wrong value
// types) are located by searching for the key they name.
#include "cli/spec_file.h"

#include <cctype>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/field_path.h"
#include "common/files.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace xmod::cli {
namespace {

// 1-based line and column of byte `offset` in `text`.
std::pair<int, int> LineColumn(absl::string_view text, size_t offset) {
  int line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

absl::Status ErrorAt(absl::string_view name, absl::string_view text, size_t offset,
                     absl::string_view what) {
  auto [line, column] = LineColumn(text, offset);
  return absl::InvalidArgumentError(absl::StrCat(name, ":", line, ":", column, ": ", what));
}

class TextErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat(line + 1, ":", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

// A JSON syntax scanner (RFC 8259) that reports the offset of the first error.
class JsonScanner {
 public:
  explicit JsonScanner(absl::string_view text) : s_(text) {}

  // True if the whole text is one JSON value; otherwise error() and offset() say why.
  bool Scan() {
    SkipSpace();
    if (!Value(0)) return false;
    SkipSpace();
    if (i_ != s_.size()) return Fail("unexpected text after the JSON value");
    return true;
  }
  const std::string& error() const { return error_; }
  size_t offset() const { return i_; }

 private:
  bool Fail(absl::string_view what) {
    error_ = std::string(what);
    return false;
  }
  void SkipSpace() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  bool Literal(absl::string_view word) {
    if (s_.substr(i_, word.size()) != word) return Fail("invalid literal");
    i_ += word.size();
    return true;
  }
  bool String() {
    ++i_;  // opening quote
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '"') {
        ++i_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return Fail("control character in string");
      if (c == '\\') {
        ++i_;
        if (i_ >= s_.size()) break;
        char e = s_[i_];
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k) {
            if (i_ + k >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_ + k]))) {
              return Fail("bad \\u escape");
            }
          }
          i_ += 4;
        } else if (!absl::StrContains("\"\\/bfnrt", e)) {
          return Fail("bad escape in string");
        }
      }
      ++i_;
    }
    return Fail("unterminated string");
  }
  bool Digits() {
    size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    return i_ > start || Fail("expected a digit");
  }
  bool Number() {
    if (s_[i_] == '-') ++i_;
    if (!Digits()) return false;
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (!Digits()) return false;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!Digits()) return false;
    }
    return true;
  }
  bool Container(int depth, char close, bool object) {
    ++i_;  // opening bracket
    SkipSpace();
    if (i_ < s_.size() && s_[i_] == close) {
      ++i_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (object) {
        if (i_ >= s_.size() || s_[i_] != '"') return Fail("expected a quoted key");
        if (!String()) return false;
        SkipSpace();
        if (i_ >= s_.size() || s_[i_] != ':') return Fail("expected ':' after the key");
        ++i_;
        SkipSpace();
      }
      if (!Value(depth + 1)) return false;
      SkipSpace();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == close) {
        ++i_;
        return true;
      }
      return Fail(absl::StrCat("expected ',' or '", std::string(1, close), "'"));
    }
  }
  bool Value(int depth) {
    if (depth > 100) return Fail("nested too deeply");
    if (i_ >= s_.size()) return Fail("unexpected end of input");
    switch (s_[i_]) {
      case '{':
        return Container(depth, '}', true);
      case '[':
        return Container(depth, ']', false);
      case '"':
        return String();
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        if (s_[i_] == '-' || std::isdigit(static_cast<unsigned char>(s_[i_]))) return Number();
        return Fail("expected a value");
    }
  }

  absl::string_view s_;
  size_t i_ = 0;
  std::string error_;
};

// Protobuf's JSON errors name the field path first: "(grids[0].ks[0]): invalid value ...",
// "grids[0].bogus: Cannot find field.". Returns that path, or "" when the message names none
// (a key of it empty or holding a space or quote).
std::string JsonErrorPath(absl::string_view message) {
  size_t colon = message.find(": ");
  if (colon == absl::string_view::npos) return "";
  absl::string_view path = absl::StripSuffix(absl::StripPrefix(message.substr(0, colon), "("), ")");
  for (absl::string_view key : absl::StrSplit(path, '.')) {
    key = key.substr(0, key.find('['));
    if (key.empty() || key.find_first_of(" \"") != absl::string_view::npos) return "";
  }
  return std::string(path);
}

// The offset in `text` of the last key of field path `path` (JsonErrorPath), searching for
// each key after the previous one (indices are not followed), or npos.
size_t LocateJsonField(absl::string_view text, absl::string_view path) {
  if (path.empty()) return absl::string_view::npos;
  size_t at = absl::string_view::npos;
  size_t from = 0;
  for (absl::string_view key : absl::StrSplit(path, '.')) {
    key = key.substr(0, key.find('['));
    at = text.find(absl::StrCat("\"", key, "\""), from);
    if (at == absl::string_view::npos) return absl::string_view::npos;
    from = at + key.size() + 2;
  }
  return at;
}

}  // namespace

absl::StatusOr<SpecSyntax> SpecSyntaxForPath(absl::string_view path) {
  std::string lower = absl::AsciiStrToLower(path);
  for (absl::string_view ext : {".textpb", ".txtpb", ".pbtxt", ".textproto"}) {
    if (absl::EndsWith(lower, ext)) return SpecSyntax::kText;
  }
  if (absl::EndsWith(lower, ".json")) return SpecSyntax::kJson;
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": unknown spec extension (use .textpb, .txtpb, .pbtxt for text format or .json)"));
}

absl::Status ParseSpecText(absl::string_view contents, SpecSyntax syntax, absl::string_view name,
                           google::protobuf::Message* message) {
  message->Clear();
  if (syntax == SpecSyntax::kText) {
    google::protobuf::TextFormat::Parser parser;
    TextErrors errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(std::string(contents), message)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ":", errors.first().empty() ? "1:1: cannot parse" : errors.first()));
    }
    return absl::OkStatus();
  }
  JsonScanner scanner(contents);
  if (!scanner.Scan()) return ErrorAt(name, contents, scanner.offset(), scanner.error());
  google::protobuf::util::JsonParseOptions options;
  auto status =
      google::protobuf::util::JsonStringToMessage(std::string(contents), message, options);
  if (status.ok()) return absl::OkStatus();
  const std::string what(status.message());
  const std::string path = JsonErrorPath(what);
  const size_t at = LocateJsonField(contents, path);
  absl::Status error = at != absl::string_view::npos
                           ? ErrorAt(name, contents, at, what)
                           : absl::InvalidArgumentError(absl::StrCat(name, ": ", what));
  // The message leads with the file's position; the field protobuf named is the payload.
  if (!path.empty()) error.SetPayload(kFieldPathUrl, absl::Cord(path));
  return error;
}

SpecSyntax SpecSyntaxForContents(absl::string_view contents) {
  const size_t first = contents.find_first_not_of(" \t\r\n");
  return first != absl::string_view::npos && contents[first] == '{' ? SpecSyntax::kJson
                                                                    : SpecSyntax::kText;
}

absl::Status LoadSpec(const std::string& path, std::istream* in,
                      google::protobuf::Message* message) {
  if (path == "-") {
    if (in == nullptr) return absl::NotFoundError("-: no standard input to read the spec from");
    std::ostringstream contents;
    contents << in->rdbuf();
    const std::string text = contents.str();
    return ParseSpecText(text, SpecSyntaxForContents(text), "<stdin>", message);
  }
  const bool has_extension = std::filesystem::path(path).has_extension();
  absl::StatusOr<SpecSyntax> syntax =
      has_extension ? SpecSyntaxForPath(path) : absl::StatusOr<SpecSyntax>(SpecSyntax::kText);
  if (!syntax.ok()) return syntax.status();
  auto contents = ReadFile(path);
  if (!contents.ok()) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot read: ", contents.status().message()));
  }
  return ParseSpecText(*contents, has_extension ? *syntax : SpecSyntaxForContents(*contents), path,
                       message);
}

absl::StatusOr<xmod::v1::SweepSpec> LoadSweepSpec(const std::string& path, std::istream* in) {
  xmod::v1::SweepSpec spec;
  if (absl::Status status = LoadSpec(path, in, &spec); !status.ok()) return status;
  return spec;
}

void AbsolutizeDataGlobs(const std::string& base_dir, xmod::v1::SweepSpec* spec) {
  auto absolutize = [&base_dir](std::string* glob) {
    if (!glob->empty() && glob->front() != '/') *glob = base_dir + "/" + *glob;
  };
  absolutize(spec->mutable_data()->mutable_train_glob());
  absolutize(spec->mutable_data()->mutable_val_glob());
}

}  // namespace xmod::cli
