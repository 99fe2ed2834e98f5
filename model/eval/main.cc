// xmod-eval: zero-shot evaluation of a checkpoint on one task (model/eval/evaluate.h):
//   xmod-eval --checkpoint FILE --task NAME --data FILE [--output json|text]
// prints {"task", "n", "acc", "acc_norm"} (lambada: "acc" and "ppl"). The model is rebuilt
// from the RunSpec stored in the checkpoint (--spec overrides it) and the text tokenized
// with the run's tokenizer (--tokenizer; default: tokenizer_<vocab>.txt beside the run's
// validation shards). Exit 0 on success, 1 on any failure (the Status on stderr).
#include <torch/version.h>

#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/proto_json.h"
#include "model/eval/evaluate.h"
#include "model/train/threads.h"

namespace {

absl::StatusOr<std::string> Run(const std::string& checkpoint, const std::string& task,
                                const std::string& data, const std::string& labels,
                                const std::string& tokenizer_spec, const std::string& spec,
                                const std::string& device, int batch_size,
                                const std::string& output) {
  if (output != "json" && output != "text") {
    return absl::InvalidArgumentError(
        absl::StrCat("--output: \"", output, "\" is neither json nor text"));
  }
  absl::StatusOr<std::vector<xmod::TaskExample>> examples = xmod::ReadTask(task, data, labels);
  if (!examples.ok()) return examples.status();
  absl::StatusOr<xmod::EvalModel> model = xmod::LoadEvalModel(checkpoint, spec, device);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<xmod::Tokenizer>> tokenizer =
      xmod::OpenEvalTokenizer(tokenizer_spec, model->spec, model->vocab);
  if (!tokenizer.ok()) return tokenizer.status();
  xmod::Scorer scorer(model->model, model->seq_len, torch::Device(device), batch_size);
  absl::StatusOr<xmod::v1::EvalTaskResult> result =
      xmod::EvaluateTask(task, *examples, **tokenizer, scorer);
  if (!result.ok()) return result.status();
  if (output == "text") {
    std::string line = absl::StrCat(result->task(), ": n ", result->n(), ", acc ", result->acc());
    if (result->has_acc_norm()) absl::StrAppend(&line, ", acc_norm ", result->acc_norm());
    if (result->has_ppl()) absl::StrAppend(&line, ", ppl ", result->ppl());
    return line;
  }
  return xmod::ProtoJson(*result, xmod::JsonLayout::kLine);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"xmod-eval: zero-shot evaluation of an xmod checkpoint on one task"};
  xmod::AddVersionFlag(app, "xmod-eval", "LibTorch " TORCH_VERSION);
  std::string checkpoint, task, data, labels, tokenizer, spec, device = "cpu", output = "json";
  int batch_size = 16, threads = 0;
  app.add_option("--checkpoint", checkpoint, "checkpoint written by xmod-train")->required();
  app.add_option("--task", task,
                 "hellaswag, arc_easy, arc_challenge, piqa, boolq, lambada or gcide")
      ->required();
  app.add_option("--data", data, "the task's JSONL file")->required();
  app.add_option("--labels", labels,
                 "piqa: labels file (default: a label field, or <data>-labels.lst)");
  app.add_option("--tokenizer", tokenizer,
                 "merges file or gpt2:DIR (default: tokenizer_<vocab>.txt beside the run's "
                 "validation shards)");
  app.add_option("--spec", spec, "RunSpec file to use instead of the checkpoint's");
  app.add_option("--device", device, "cpu or cuda:N");
  app.add_option("--batch_size", batch_size, "sequences per forward pass");
  app.add_option("--threads", threads, "CPU threads (0: all cores)");
  app.add_option("--output", output, "json or text");
  if (std::optional<int> exit = xmod::ParseCommandLine(app, argc, argv)) return *exit;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  xmod::ApplyThreadBudget(threads);

  absl::StatusOr<std::string> result =
      Run(checkpoint, task, data, labels, tokenizer, spec, device, batch_size, output);
  if (!result.ok()) {
    std::fprintf(stderr, "xmod-eval: %s\n", result.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", result->c_str());
  return 0;
}
