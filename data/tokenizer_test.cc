// Tests of the pre-tokenizer, the BPE trainer, merges files and OpenTokenizer.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "data/bpe_file.h"
#include "data/bpe_trainer.h"
#include "data/open_tokenizer.h"
#include "data/pretokenizer.h"
#include "data/unicode_classes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / absl::StrCat(::getpid(), "_", name))
      .string();
}

TEST(PretokenizerTest, SplitsLikeTheGpt2Pattern) {
  EXPECT_THAT(SplitGpt2("Hello world, it's 2024!"),
              ElementsAre("Hello", " world", ",", " it", "'s", " 2024", "!"));
  // Whitespace runs leave their last space to the next word; a run at the end stays whole.
  EXPECT_THAT(SplitGpt2("a   b\t\tc  "), ElementsAre("a", "  ", " b", "\t", "\t", "c", "  "));
  EXPECT_THAT(SplitGpt2("x\n\ny"), ElementsAre("x", "\n", "\n", "y"));
  // Capital contractions are not special: "'" joins the punctuation run, "S" the letters.
  EXPECT_THAT(SplitGpt2("IT'S it'll"), ElementsAre("IT", "'", "S", " it", "'ll"));
  EXPECT_THAT(SplitGpt2("café 日本 ١٢"), ElementsAre("café", " 日本", " ١٢"));
}

TEST(PretokenizerTest, InvalidUtf8BytesAreSingleOtherCharacters) {
  const std::string text = "ab\xff\xfe cd\xc3";
  std::vector<absl::string_view> pieces = SplitGpt2(text);
  EXPECT_THAT(pieces, ElementsAre("ab", "\xff\xfe", " cd", "\xc3"));
  EXPECT_EQ(DecodeCodePoint("\xe2\x82", 0).bytes, 1);                // truncated sequence
  EXPECT_EQ(DecodeCodePoint("\xc0\xaf", 0).cls, CharClass::kOther);  // overlong form
}

TEST(UnicodeClassesTest, ClassesFollowUnicodeAndJavaScript) {
  EXPECT_EQ(ClassOf(U'é'), CharClass::kLetter);
  EXPECT_EQ(ClassOf(U'日'), CharClass::kLetter);
  EXPECT_EQ(ClassOf(U'٣'), CharClass::kNumber);  // Arabic-Indic digit (Nd)
  EXPECT_EQ(ClassOf(U'Ⅻ'), CharClass::kNumber);  // Nl
  EXPECT_EQ(ClassOf(U'½'), CharClass::kNumber);  // No
  EXPECT_EQ(ClassOf(U'\u00a0'), CharClass::kSpace);
  EXPECT_EQ(ClassOf(U'\u3000'), CharClass::kSpace);
  EXPECT_EQ(ClassOf(U'\u0085'), CharClass::kOther);  // not in JavaScript's \s
  EXPECT_EQ(ClassOf(U'\u200b'), CharClass::kOther);  // zero width space is Cf
  EXPECT_EQ(ClassOf(U'\u0301'), CharClass::kOther);  // combining mark (Mn)
}

TEST(BpeTrainerTest, MergesTheMostFrequentPairFirstAndRoundTrips) {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "low lower lowest newer wider ";
  absl::StatusOr<std::vector<MergePair>> merges = TrainBpe(text, 256 + 10);
  ASSERT_TRUE(merges.ok()) << merges.status();
  ASSERT_EQ(merges->size(), 10u);
  // "lo", "ow", "we" and "er" each occur 150 times, more than any other pair; ties go to
  // the smaller ids, so 'e' (101) + 'r' (114) is merged first.
  EXPECT_EQ((*merges)[0], MergePair('e', 'r'));

  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer = MakeBpeTokenizer(*merges);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), 266u);
  const std::string sample = "lower newest widest, lowly \xff bytes";
  std::vector<uint32_t> ids = (*tokenizer)->Encode(sample);
  EXPECT_LT(ids.size(), sample.size());  // merges apply
  absl::StatusOr<std::string> decoded = (*tokenizer)->Decode(ids);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, sample);
}

TEST(BpeTrainerTest, StopsWhenNoPairRepeatsAndRejectsBadVocab) {
  absl::StatusOr<std::vector<MergePair>> merges = TrainBpe("abcd", 2048);
  ASSERT_TRUE(merges.ok());
  EXPECT_TRUE(merges->empty());
  EXPECT_EQ(TrainBpe("abc", 100).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TrainBpe("abc", 70000).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BpeTrainerTest, CompressesRealisticText) {
  std::string text;
  for (int i = 0; i < 200; ++i) {
    absl::StrAppend(&text, "The quick brown fox number ", i,
                    " jumps over the lazy dog; the dog sleeps.\n\n");
  }
  absl::StatusOr<std::vector<MergePair>> merges = TrainBpe(text, 512);
  ASSERT_TRUE(merges.ok());
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer = MakeBpeTokenizer(*merges);
  ASSERT_TRUE(tokenizer.ok());
  const std::vector<uint32_t> ids = (*tokenizer)->Encode(text);
  EXPECT_LT(ids.size() * 3, text.size());  // > 3 bytes per token on its own training text
  EXPECT_EQ(*(*tokenizer)->Decode(ids), text);
}

TEST(BpeFileTest, SaveLoadRoundTripThroughOpenTokenizer) {
  const std::vector<MergePair> merges = {{'a', 'b'}, {256, 'c'}, {' ', 257}};
  const std::string path = TempPath("merges.txt");
  ASSERT_TRUE(SaveBpeMerges(path, merges).ok());
  absl::StatusOr<std::vector<MergePair>> loaded = LoadBpeMerges(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, merges);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = OpenTokenizer(path, "");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), 259u);
  EXPECT_THAT((*tokenizer)->Encode("abc abc ab"), ElementsAre(257, 258, ' ', 256));
  absl::StatusOr<std::string> bad = (*tokenizer)->Decode(std::vector<uint32_t>{1, 259});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("ids[1]: 259"));
  std::filesystem::remove(path);
}

TEST(BpeFileTest, MalformedFilesNameTheLine) {
  const std::string path = TempPath("bad_merges.txt");
  std::ofstream(path) << "xmod-bpe 1\nmerges 2\n97 98\n97 300\n";
  absl::StatusOr<std::vector<MergePair>> loaded = LoadBpeMerges(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr(path + ":4: merge uses an id not defined"));
  std::ofstream(path) << "xmod-bpe 1\nmerges 3\n97 98\n";
  EXPECT_THAT(LoadBpeMerges(path).status().message(),
              HasSubstr("header says 3 merges, file holds 1"));
  std::ofstream(path) << "something else\n";
  EXPECT_THAT(LoadBpeMerges(path).status().message(), HasSubstr(path + ":1: expected"));
  EXPECT_EQ(OpenTokenizer(TempPath("missing.txt"), "").status().code(),
            absl::StatusCode::kNotFound);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace xmod
