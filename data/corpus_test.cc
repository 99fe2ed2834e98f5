// Tests of corpus making: dictd index parsing, gzip reading, gcide entry cleaning, and
// encoding documents into train/val shards.
#include <unistd.h>
#include <zlib.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "data/bpe_file.h"
#include "data/corpus_encoder.h"
#include "data/dictd.h"
#include "data/gcide_task.h"
#include "data/gcide_text.h"
#include "data/shard.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

std::filesystem::path TempDir(const std::string& name) {
  std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat(name, "_", ::getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(DictdTest, ParsesBase64OffsetsAndLengths) {
  absl::StatusOr<std::vector<DictEntry>> entries =
      ParseDictIndex("Abandon\tBa\tz\n00-database-url\tC\tv\n", "x.index");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].headword, "Abandon");
  EXPECT_EQ((*entries)[0].offset, 1u * 64 + 26);  // 'B' = 1, 'a' = 26
  EXPECT_EQ((*entries)[0].length, 51u);           // 'z' = 51
  EXPECT_EQ((*entries)[1].offset, 2u);
  absl::StatusOr<std::vector<DictEntry>> bad = ParseDictIndex("ok\tA\tA\nbroken\t!\n", "x.index");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("x.index:2:"));
}

TEST(DictdTest, ReadsGzipWithLimit) {
  const std::string path = (TempDir("gz") / "a.gz").string();
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  const std::string text = "hello gzip world\n";
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  EXPECT_EQ(*ReadGzipFile(path), text);
  EXPECT_EQ(*ReadGzipFile(path, 5), "hello");
  EXPECT_EQ(ReadGzipFile(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(GcideTextTest, StripsMarkupAndReflowsParagraphs) {
  const std::string entry =
      "Abandon \\A*ban\"don\\ ([.a]*b[a^]n\"d[u^]n), v. t. [imp. & p. p.\n"
      "   {Abandoned} (-d[u^]nd).] [OF. abandoner.]\n"
      "   1. To cast or drive out; to banish. [Obs.]\n"
      "      [1913 Webster]\n"
      "\n"
      "            That he might . . . abandon them from him. --Udall.\n"
      "      [1913 Webster]\n"
      "\n"
      "   Note: From the [AE]gean; a c[ae]sura, na[\"i]ve, Ar*te`ri*o*scle*rot\"ic.\n"
      "         [WordNet 1.5 +PJC]\n";
  EXPECT_EQ(GcideEntryToText(entry),
            "Abandon, v. t. [imp. & p. p. Abandoned.] [OF. abandoner.] 1. To cast or drive "
            "out; to banish. [Obs.]\n"
            "That he might . . . abandon them from him. --Udall.\n"
            "Note: From the Ægean; a cæsura, naïve, Arteriosclerotic.");
  EXPECT_EQ(GcideEntryToText("  [1913 Webster]\n\n"), "");
}

TEST(GcideTextTest, ConvertsTheInstalledDictionary) {
  const std::string dict = "/usr/share/dictd/gcide.dict.dz";
  ASSERT_TRUE(std::filesystem::exists(dict)) << "dict-gcide is not installed (apt-get install "
                                                "dict-gcide)";
  const std::string out = (TempDir("gcide") / "gcide.txt").string();
  absl::StatusOr<GcideStats> stats = ConvertGcide(dict, "/usr/share/dictd/gcide.index", out);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GT(stats->entries, 100000);
  EXPECT_GT(stats->text_bytes, 20'000'000);
  absl::StatusOr<std::string> head = ReadGzipFile(out, 4096);  // gzread reads plain files too
  ASSERT_TRUE(head.ok());
  EXPECT_THAT(*head, ::testing::Not(HasSubstr("00-database")));
  EXPECT_THAT(*head, ::testing::Not(HasSubstr("[1913 Webster]")));
  std::filesystem::remove(out);
}

// A byte-level tokenizer with no merges: one token per byte, so counts are checkable.
std::unique_ptr<BpeTokenizer> ByteTokenizer() { return *MakeBpeTokenizer({}); }

TEST(CorpusEncoderTest, SplitsDocumentsEvenlyAndCutsShards) {
  std::string text;
  for (int i = 0; i < 40; ++i) absl::StrAppend(&text, "doc", i % 10, "\n\n");  // 6 bytes each
  const std::filesystem::path dir = TempDir("encode");
  CorpusEncodeOptions options;
  options.out_prefix = (dir / "sub" / "demo").string();
  options.val_fraction = 0.1;
  options.shard_tokens = 100;
  std::unique_ptr<BpeTokenizer> tokenizer = ByteTokenizer();
  absl::StatusOr<CorpusEncodeStats> stats = EncodeCorpus(text, *tokenizer, options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->documents, 40);
  EXPECT_EQ(stats->val_documents, 4);  // documents 9, 19, 29, 39
  EXPECT_EQ(stats->val_tokens, 24);
  EXPECT_EQ(stats->train_tokens, 36 * 6);
  ASSERT_EQ(stats->train_shards.size(), 3u);  // 100 + 100 + 16
  EXPECT_EQ(stats->train_shards[0], options.out_prefix + "_train_000.bin");
  ASSERT_EQ(stats->val_shards.size(), 1u);
  EXPECT_EQ(stats->val_shards[0], options.out_prefix + "_val_000.bin");

  absl::StatusOr<std::unique_ptr<ShardReader>> val = ShardReader::Open(stats->val_shards[0]);
  ASSERT_TRUE(val.ok()) << val.status();
  const std::string val_text((*val)->tokens(), (*val)->tokens() + (*val)->size());
  EXPECT_EQ(val_text, "doc9\n\ndoc9\n\ndoc9\n\ndoc9\n\n");
  absl::StatusOr<std::unique_ptr<ShardReader>> last = ShardReader::Open(stats->train_shards[2]);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ((*last)->size(), 16u);
  std::filesystem::remove_all(dir);
}

TEST(CorpusEncoderTest, PrependsEndOfTextAndRefusesBadOptions) {
  const std::filesystem::path dir = TempDir("encode_eot");
  CorpusEncodeOptions options;
  options.out_prefix = (dir / "p").string();
  options.val_fraction = 0;
  options.eot_id = 255;
  std::unique_ptr<BpeTokenizer> tokenizer = ByteTokenizer();
  absl::StatusOr<CorpusEncodeStats> stats = EncodeCorpus("a\n\nb", *tokenizer, options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_TRUE(stats->val_shards.empty());
  absl::StatusOr<std::unique_ptr<ShardReader>> train = ShardReader::Open(stats->train_shards[0]);
  ASSERT_TRUE(train.ok());
  EXPECT_THAT((*train)->span(), ::testing::ElementsAre(255, 'a', '\n', '\n', 255, 'b'));

  options.val_fraction = 1.0;
  EXPECT_THAT(EncodeCorpus("a", *tokenizer, options).status().message(), HasSubstr("val_fraction"));
  options.val_fraction = 0.1;
  options.shard_tokens = 0;
  EXPECT_THAT(EncodeCorpus("a", *tokenizer, options).status().message(), HasSubstr("shard_tokens"));
  std::filesystem::remove_all(dir);
}

// A corpus whose every document is an entry, half of them (val_fraction 0.5) validation.
TEST(GcideTaskTest, UsesValidationEntriesWithSeededDistractors) {
  const std::string corpus =
      "Abacus, n. A frame with beads for counting.\n\n"           // 0 train
      "Beacon, n. A signal fire on a hill.\n\n"                   // 1 val
      "Cobble, v. t. To mend shoes roughly.\n\n"                  // 2 train
      "Dagger, n. A short knife for stabbing.\n\n"                // 3 val
      "Ember n. a small glowing piece of coal.\nSyn: cinder\n\n"  // 4 train
      "Fathom, 1. No part of speech.\n\n"                         // 5 val
      "Gable, n. The triangular end of a gable roof.\n\n"         // 6 train
      "Hamlet n. a small village.\n\n"                            // 7 val
      "Iv, n. Too short a headword.\n\n"                          // 8 train
      "Jetty, n. A pier; a jetty of stone.\n\n";                  // 9 val
  GcideTaskOptions options;
  options.val_fraction = 0.5;
  options.choices = 3;
  options.seed = 7;
  GcideTaskStats stats;
  absl::StatusOr<std::string> lines = MakeGcideTask(corpus, options, &stats);
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_EQ(stats.documents, 10);
  EXPECT_EQ(stats.qualifying, 3);  // Beacon, Dagger, Hamlet (Jetty defines itself)
  EXPECT_EQ(stats.examples, 3);
  const std::vector<std::string> rows = absl::StrSplit(*lines, '\n', absl::SkipEmpty());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_THAT(rows[0], HasSubstr("\"definition\":\"n. A signal fire on a hill.\""));
  EXPECT_THAT(rows[2], HasSubstr("\"definition\":\"n. a small village.\""));
  for (const std::string& row : rows) {
    EXPECT_THAT(row, ::testing::ContainsRegex("\"label\":[0-2]"));
    EXPECT_THAT(row, ::testing::Not(HasSubstr("Abacus")));  // training entries never appear
  }
  // Deterministic for a seed; another seed draws other distractors or positions.
  GcideTaskStats again;
  EXPECT_EQ(*MakeGcideTask(corpus, options, &again), *lines);
  options.seed = 8;
  EXPECT_NE(*MakeGcideTask(corpus, options, &again), *lines);
  options.choices = 4;
  EXPECT_TRUE(absl::IsInvalidArgument(MakeGcideTask(corpus, options, &again).status()));
}

}  // namespace
}  // namespace xmod
