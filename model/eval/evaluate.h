// Zero-shot evaluation of a trained model: a task's examples (tasks.h) tokenized and scored
// (scorer.h) into an EvalTaskResult, the run metrics it becomes, and the pieces xmod-eval
// and xmod-train share — opening the run's tokenizer (rebuilding a model from a checkpoint
// is model/train/eval_model.h's). Metrics and aggregation are lm-evaluation-harness 0.4's
// (lm_eval/api/task.py process_results, lm_eval/api/metrics.py):
//   - multiple choice: acc = the choice of highest summed log-likelihood is the label;
//     acc_norm = the same with each log-likelihood divided by len(answer), the answer's
//     length in characters without the leading delimiter (Choice::answer_chars); ties and
//     NaNs go as numpy.argmax sends them (the first); both averaged over examples;
//   - lambada: acc = greedy decoding reproduces every token of the last word; ppl =
//     exp(-mean over examples of the last word's summed log-likelihood) (aggregation
//     "perplexity": a per-word, not a per-token, perplexity);
//   - each with its standard error as the harness reports it (stderr.h): acc_stderr and
//     acc_norm_stderr from the per-example values, ppl_stderr by the harness's seeded
//     bootstrap over `bootstrap_iters` resamples of the examples' log-likelihoods.
// Thread-compatible.
#ifndef XMOD_MODEL_EVAL_EVALUATE_H_
#define XMOD_MODEL_EVAL_EVALUATE_H_

#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "data/tokenizer.h"
#include "model/eval/scorer.h"
#include "model/eval/stderr.h"
#include "model/eval/tasks.h"
#include "model/transformer.h"
#include "xmod/v1/eval.pb.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

// The scores of `choices`, in order. INVALID_ARGUMENT "<describe(i)>: its context|continuation
// encodes to no token" for a choice whose text tokenizes to nothing; errors of Scorer::Score.
absl::StatusOr<std::vector<ContinuationScore>> ScoreChoices(
    const std::vector<Choice>& choices, Tokenizer& tokenizer, Scorer& scorer,
    absl::FunctionRef<std::string(size_t)> describe);

// Scores `examples` of `task`. Errors of Scorer::Score, INVALID_ARGUMENT naming the example
// whose context or continuation encodes to no token.
absl::StatusOr<xmod::v1::EvalTaskResult> EvaluateTask(const std::string& task,
                                                      const std::vector<TaskExample>& examples,
                                                      Tokenizer& tokenizer, Scorer& scorer,
                                                      int bootstrap_iters = kHarnessBootstrapIters);

// The metrics of `examples` of `task` from `scores`, one per choice in order (as
// EvaluateTask computes them; see the file comment). `bootstrap_iters`: 0 (no standard
// errors, as the harness's bootstrap_iters = 0) or >= 2.
xmod::v1::EvalTaskResult AggregateTask(const std::string& task,
                                       const std::vector<TaskExample>& examples,
                                       const std::vector<ContinuationScore>& scores,
                                       int bootstrap_iters = kHarnessBootstrapIters);

// The run metrics of a result: eval/<task>/acc, eval/<task>/acc_norm (multiple choice),
// eval/<task>/ppl (lambada), each followed by its standard error where there is one
// (eval/<task>/acc_stderr, acc_norm_stderr, ppl_stderr), and eval/<task>/n.
std::vector<std::pair<std::string, double>> EvalMetrics(const xmod::v1::EvalTaskResult& result);

// One line for people: "hellaswag: n 6, acc 0.5 ± 0.223607, acc_norm 0.333333 ± 0.210819"
// (LAMBADA: acc and ppl), each metric with its standard error where there is one.
std::string EvalResultLine(const xmod::v1::EvalTaskResult& result);

// The tokenizer named by `spec`: a merges file (xmod-data train-bpe) or "gpt2:DIR"; empty =
// tokenizer_<vocab>.txt in the directory of the run's data.val_glob (where
// data/make_demo_corpus.sh writes it). FAILED_PRECONDITION when its vocabulary is larger
// than the model's `vocab`; the errors of OpenTokenizer.
absl::StatusOr<std::unique_ptr<Tokenizer>> OpenEvalTokenizer(const std::string& spec,
                                                             const xmod::v1::RunSpec& run,
                                                             int vocab);

}  // namespace xmod

#endif  // XMOD_MODEL_EVAL_EVALUATE_H_
