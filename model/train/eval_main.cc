// xmod-eval: zero-shot evaluation of a checkpoint (model/eval/evaluate.h), in one of two modes:
//   xmod-eval --checkpoint FILE --task NAME --data FILE [--output json|text]
//             [--bootstrap_iters N]
//     one task's documents, scored as lm-evaluation-harness scores them; prints {"task", "n",
//     "acc", "acc_stderr", "acc_norm", "acc_norm_stderr"} (lambada: "acc", "acc_stderr",
//     "ppl", "ppl_stderr"), the standard errors as the harness computes them (stderr.h; none
//     for one document or --bootstrap_iters 0);
//   xmod-eval --checkpoint FILE --pairs FILE
//     raw (context, continuation) pairs (pairs.h) — the harness adapter's requests; prints
//     one {"loglikelihood", "is_greedy", "tokens"} line per pair, in order.
// The model is rebuilt from the RunSpec stored in the checkpoint (--spec overrides it) and the
// text tokenized with the run's tokenizer (--tokenizer; default: tokenizer_<vocab>.txt beside
// the run's validation shards). Exit 0 on success, 1 on any failure (the Status on stderr).
#include <torch/version.h>

#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/command_line.h"
#include "common/proto_json.h"
#include "model/eval/evaluate.h"
#include "model/eval/pairs.h"
#include "model/train/eval_model.h"
#include "model/train/threads.h"

namespace {

struct Options {
  std::string checkpoint, task, data, labels, pairs, tokenizer, spec, device = "cpu";
  std::string output = "json";
  int batch_size = 16, threads = 0;
  int bootstrap_iters = xmod::kHarnessBootstrapIters;
};

// The documents of --task / --data, or the pairs of --pairs: read before the model is loaded,
// so that bad input fails fast.
struct Input {
  std::vector<xmod::TaskExample> examples;
  std::vector<xmod::Choice> pairs;
};

absl::StatusOr<Input> ReadInput(const Options& o) {
  if (o.pairs.empty() == (o.task.empty() || o.data.empty())) {
    return absl::InvalidArgumentError("give either --task and --data, or --pairs");
  }
  if (o.bootstrap_iters < 0 || o.bootstrap_iters == 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--bootstrap_iters: ", o.bootstrap_iters,
        " must be 0 (no standard errors) or >= 2 (one resample has no standard deviation)"));
  }
  if (o.output != "json" && o.output != "text") {
    return absl::InvalidArgumentError(
        absl::StrCat("--output: \"", o.output, "\" is neither json nor text"));
  }
  Input input;
  if (o.pairs.empty()) {
    absl::StatusOr<std::vector<xmod::TaskExample>> examples =
        xmod::ReadTask(o.task, o.data, o.labels);
    if (!examples.ok()) return examples.status();
    input.examples = *std::move(examples);
  } else {
    absl::StatusOr<std::vector<xmod::Choice>> pairs = xmod::ReadPairs(o.pairs);
    if (!pairs.ok()) return pairs.status();
    input.pairs = *std::move(pairs);
  }
  return input;
}

absl::StatusOr<std::string> EvaluateExamples(const Options& o, const Input& input,
                                             xmod::Tokenizer& tokenizer, xmod::Scorer& scorer) {
  absl::StatusOr<xmod::v1::EvalTaskResult> result =
      xmod::EvaluateTask(o.task, input.examples, tokenizer, scorer, o.bootstrap_iters);
  if (!result.ok()) return result.status();
  if (o.output == "text") return xmod::EvalResultLine(*result);
  return xmod::ProtoJson(*result, xmod::JsonLayout::kLine);
}

absl::StatusOr<std::string> ScorePairs(const Options& o, const Input& input,
                                       xmod::Tokenizer& tokenizer, xmod::Scorer& scorer) {
  absl::StatusOr<std::vector<xmod::ContinuationScore>> scores =
      xmod::ScoreChoices(input.pairs, tokenizer, scorer,
                         [&](size_t i) { return absl::StrCat(o.pairs, " pair ", i + 1); });
  if (!scores.ok()) return scores.status();
  return absl::StrJoin(*scores, "\n", [](std::string* out, const xmod::ContinuationScore& s) {
    out->append(xmod::PairScoreJson(s));
  });
}

absl::StatusOr<std::string> Run(const Options& o) {
  absl::StatusOr<Input> input = ReadInput(o);
  if (!input.ok()) return input.status();
  absl::StatusOr<xmod::EvalModel> model = xmod::LoadEvalModel(o.checkpoint, o.spec, o.device);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<xmod::Tokenizer>> tokenizer =
      xmod::OpenEvalTokenizer(o.tokenizer, model->spec, model->vocab);
  if (!tokenizer.ok()) return tokenizer.status();
  xmod::Scorer scorer(model->model, model->seq_len, torch::Device(o.device), o.batch_size);
  return o.pairs.empty() ? EvaluateExamples(o, *input, **tokenizer, scorer)
                         : ScorePairs(o, *input, **tokenizer, scorer);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"xmod-eval: zero-shot evaluation of an xmod checkpoint on one task"};
  xmod::AddVersionFlag(app, "xmod-eval", "LibTorch " TORCH_VERSION);
  Options o;
  app.add_option("--checkpoint", o.checkpoint, "checkpoint written by xmod-train")->required();
  app.add_option("--task", o.task,
                 "hellaswag, arc_easy, arc_challenge, piqa, boolq, lambada or gcide");
  app.add_option("--data", o.data, "the task's JSONL file");
  app.add_option("--pairs", o.pairs,
                 "JSONL of {\"context\", \"continuation\"} pairs to score (instead of a task)");
  app.add_option("--labels", o.labels,
                 "piqa: labels file (default: a label field, or <data>-labels.lst)");
  app.add_option("--tokenizer", o.tokenizer,
                 "merges file or gpt2:DIR (default: tokenizer_<vocab>.txt beside the run's "
                 "validation shards)");
  app.add_option("--spec", o.spec, "RunSpec file to use instead of the checkpoint's");
  app.add_option("--device", o.device, "cpu or cuda:N");
  app.add_option("--batch_size", o.batch_size, "sequences per forward pass");
  app.add_option("--threads", o.threads, "CPU threads (0: all cores)");
  app.add_option("--output", o.output, "json or text (task mode)");
  app.add_option("--bootstrap_iters", o.bootstrap_iters,
                 "resamples for the perplexity's standard error, as lm-evaluation-harness's "
                 "--bootstrap_iters (0: no standard errors at all, as the harness)");
  if (std::optional<int> exit = xmod::ParseCommandLine(app, argc, argv)) return *exit;
  if (o.threads <= 0) {
    o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  xmod::ApplyThreadBudget(o.threads);

  absl::StatusOr<std::string> result = Run(o);
  if (!result.ok()) {
    std::fprintf(stderr, "xmod-eval: %s\n", result.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", result->c_str());
  return 0;
}
