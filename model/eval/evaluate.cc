// Zero-shot evaluation: tokenizing choices, picking answers, loading the model.
#include "model/eval/evaluate.h"

#include <cmath>
#include <filesystem>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "data/open_tokenizer.h"
#include "trainer_contract/series.h"

namespace xmod {
namespace {

std::vector<int64_t> Encode(Tokenizer& tokenizer, const std::string& text) {
  std::vector<uint32_t> ids = tokenizer.Encode(text);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

// numpy.argmax: the index of the first NaN if any, else of the first largest value.
size_t ArgMax(const std::vector<double>& values) {
  size_t best = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) return i;
    if (values[i] > values[best]) best = i;
  }
  return best;
}

}  // namespace

absl::StatusOr<std::vector<ContinuationScore>> ScoreChoices(
    const std::vector<Choice>& choices, Tokenizer& tokenizer, Scorer& scorer,
    absl::FunctionRef<std::string(size_t)> describe) {
  std::vector<ScoreRequest> requests;
  requests.reserve(choices.size());
  for (size_t i = 0; i < choices.size(); ++i) {
    ScoreRequest request{Encode(tokenizer, choices[i].context),
                         Encode(tokenizer, choices[i].continuation)};
    if (request.context.empty() || request.continuation.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(describe(i), ": its ", request.context.empty() ? "context" : "continuation",
                       " encodes to no token"));
    }
    requests.push_back(std::move(request));
  }
  return scorer.Score(requests);
}

absl::StatusOr<xmod::v1::EvalTaskResult> EvaluateTask(const std::string& task,
                                                      const std::vector<TaskExample>& examples,
                                                      Tokenizer& tokenizer, Scorer& scorer,
                                                      int bootstrap_iters) {
  std::vector<Choice> choices;
  std::vector<size_t> example_of;  // choices[i] belongs to examples[example_of[i]]
  for (size_t e = 0; e < examples.size(); ++e) {
    choices.insert(choices.end(), examples[e].choices.begin(), examples[e].choices.end());
    example_of.resize(choices.size(), e);
  }
  absl::StatusOr<std::vector<ContinuationScore>> scores =
      ScoreChoices(choices, tokenizer, scorer,
                   [&](size_t i) { return absl::StrCat(task, " example ", example_of[i] + 1); });
  if (!scores.ok()) return scores.status();
  return AggregateTask(task, examples, *scores, bootstrap_iters);
}

xmod::v1::EvalTaskResult AggregateTask(const std::string& task,
                                       const std::vector<TaskExample>& examples,
                                       const std::vector<ContinuationScore>& scores,
                                       int bootstrap_iters) {
  xmod::v1::EvalTaskResult result;
  result.set_task(task);
  result.set_n(static_cast<int>(examples.size()));
  // Per example, as the harness's process_results gives them: acc and acc_norm 1 or 0;
  // LAMBADA's acc and the log-likelihood of its one choice.
  std::vector<double> acc, acc_norm, loglik;
  size_t next = 0;
  for (const TaskExample& example : examples) {
    std::vector<double> raw, per_char;
    bool greedy = true;
    for (const Choice& choice : example.choices) {
      const ContinuationScore& s = scores[next++];
      raw.push_back(s.loglik);
      per_char.push_back(s.loglik / static_cast<double>(choice.answer_chars));
      greedy = greedy && s.greedy;
    }
    if (IsLastWordTask(task)) {
      acc.push_back(greedy ? 1 : 0);
      loglik.push_back(raw.front());
    } else {
      acc.push_back(ArgMax(raw) == static_cast<size_t>(example.label) ? 1 : 0);
      acc_norm.push_back(ArgMax(per_char) == static_cast<size_t>(example.label) ? 1 : 0);
    }
  }
  result.set_acc(HarnessMean(acc));
  if (std::optional<double> se = MeanStderr(acc, bootstrap_iters)) result.set_acc_stderr(*se);
  if (IsLastWordTask(task)) {
    result.set_ppl(HarnessPerplexity(loglik));
    if (std::optional<double> se = BootstrapStderr(HarnessPerplexity, loglik, bootstrap_iters)) {
      result.set_ppl_stderr(*se);
    }
  } else {
    result.set_acc_norm(HarnessMean(acc_norm));
    if (std::optional<double> se = MeanStderr(acc_norm, bootstrap_iters)) {
      result.set_acc_norm_stderr(*se);
    }
  }
  return result;
}

std::vector<std::pair<std::string, double>> EvalMetrics(const xmod::v1::EvalTaskResult& result) {
  const std::string prefix =
      absl::StrCat(SeriesName(xmod::v1::SERIES_EVAL_PREFIX), result.task(), "/");
  std::vector<std::pair<std::string, double>> metrics = {{prefix + "acc", result.acc()}};
  if (result.has_acc_stderr()) metrics.push_back({prefix + "acc_stderr", result.acc_stderr()});
  if (result.has_acc_norm()) metrics.push_back({prefix + "acc_norm", result.acc_norm()});
  if (result.has_acc_norm_stderr()) {
    metrics.push_back({prefix + "acc_norm_stderr", result.acc_norm_stderr()});
  }
  if (result.has_ppl()) metrics.push_back({prefix + "ppl", result.ppl()});
  if (result.has_ppl_stderr()) metrics.push_back({prefix + "ppl_stderr", result.ppl_stderr()});
  metrics.push_back({prefix + "n", result.n()});
  return metrics;
}

std::string EvalResultLine(const xmod::v1::EvalTaskResult& result) {
  const auto metric = [](absl::string_view name, double value, bool has_stderr, double se) {
    return has_stderr ? absl::StrCat(", ", name, " ", value, " ± ", se)
                      : absl::StrCat(", ", name, " ", value);
  };
  std::string line =
      absl::StrCat(result.task(), ": n ", result.n(),
                   metric("acc", result.acc(), result.has_acc_stderr(), result.acc_stderr()));
  if (result.has_acc_norm()) {
    absl::StrAppend(&line, metric("acc_norm", result.acc_norm(), result.has_acc_norm_stderr(),
                                  result.acc_norm_stderr()));
  }
  if (result.has_ppl()) {
    absl::StrAppend(&line,
                    metric("ppl", result.ppl(), result.has_ppl_stderr(), result.ppl_stderr()));
  }
  return line;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> OpenEvalTokenizer(const std::string& spec,
                                                             const xmod::v1::RunSpec& run,
                                                             int vocab) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer;
  if (absl::StartsWith(spec, "gpt2:")) {
    tokenizer = OpenTokenizer("gpt2", spec.substr(5));
  } else if (!spec.empty()) {
    tokenizer = OpenTokenizer(spec, "");
  } else {
    const std::filesystem::path dir = std::filesystem::path(run.data().val_glob()).parent_path();
    tokenizer = OpenTokenizer((dir / absl::StrCat("tokenizer_", vocab, ".txt")).string(), "");
  }
  if (!tokenizer.ok()) return tokenizer.status();
  if ((*tokenizer)->vocab_size() > static_cast<size_t>(vocab)) {
    return absl::FailedPreconditionError(
        absl::StrCat("tokenizer: its ", (*tokenizer)->vocab_size(),
                     " tokens do not fit the model's vocabulary of ", vocab));
  }
  return tokenizer;
}

}  // namespace xmod
