// Zero-shot tasks: reading the public JSONL formats into (context, continuation) choices.
// LibTorch-free, so the coordinator can validate task names without the model.
//
//   task            format (one JSON object a line)                      prompt / choices
//   hellaswag       {"ctx", "endings": [4], "label"}                     ctx / " " + ending
//   arc_easy,       {"question": {"stem", "choices": [{"text",           "Question: stem\nAnswer:"
//   arc_challenge     "label"}]}, "answerKey"}  (letter or digit key)    / " " + text
//   piqa            {"goal", "sol1", "sol2"} + labels file or "label"    "Question: goal\nAnswer:"
//                                                                        / " " + sol
//   boolq           {"question", "passage", "answer": bool}              "passage\nQuestion:
//                                                                        question?\nAnswer:" /
//                                                                        " yes", " no"
//   lambada         {"text"}                                             text up to the last
//                                                                        word / " " + last word
//   gcide           {"definition", "choices": [headwords], "label"}      headword / ", " +
//                                                                        definition
// gcide is ours (data/gcide_task.h): the corpus writes an entry as "Headword, n. definition",
// so each candidate headword is a context and the definition the shared continuation; the
// model scores how well each headword predicts the definition.
// Thread-safe free functions.
#ifndef XMOD_MODEL_EVAL_TASKS_H_
#define XMOD_MODEL_EVAL_TASKS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xmod {

// One candidate answer: the log-likelihood of `continuation` after `context` is its score.
struct Choice {
  std::string context;
  std::string continuation;
};

struct TaskExample {
  std::vector<Choice> choices;  // lambada: one, the target word
  int label = 0;                // index of the correct choice
};

// The task names ReadTask accepts, in the order of the table above.
const std::vector<std::string>& EvalTaskNames();
bool IsEvalTask(absl::string_view task);
// Whether `task` is scored as LAMBADA (greedy last word and perplexity) rather than by
// choosing among continuations.
bool IsLastWordTask(absl::string_view task);

// Reads `path` in the format of `task`. `labels_path` (piqa only) names the labels file;
// empty = a "label" field, else the <path minus .jsonl>-labels.lst beside it.
// INVALID_ARGUMENT for an unknown task; NOT_FOUND for a missing file; INVALID_ARGUMENT
// naming "path:line" for a malformed line or a field missing, of the wrong type or out of
// range; INVALID_ARGUMENT when the file holds no example.
absl::StatusOr<std::vector<TaskExample>> ReadTask(const std::string& task, const std::string& path,
                                                  const std::string& labels_path = "");

}  // namespace xmod

#endif  // XMOD_MODEL_EVAL_TASKS_H_
