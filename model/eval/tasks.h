// Zero-shot tasks: reading the public JSONL formats into (context, continuation) choices,
// built exactly as lm-evaluation-harness 0.4 builds its requests for the task of the same
// name (lm_eval/tasks/<task>/*.yaml: doc_to_text, doc_to_choice, target_delimiter " ",
// process_docs). LibTorch-free, so the coordinator can validate task names without the model.
//
//   task            format (one JSON object a line)          context / continuations
//   hellaswag       Rowan/hellaswag: {"activity_label",      preprocess(activity_label + ": " +
//                   "ctx_a", "ctx_b", "endings": [4],        ctx_a + " " + ctx_b.capitalize())
//                   "label"}                                 / " " + preprocess(ending)
//   arc_easy,       allenai/ai2_arc: {"question", "choices": "Question: question\nAnswer:"
//   arc_challenge   {"text", "label"}, "answerKey"}; or the  / " " + text
//                   original {"question": {"stem",
//                   "choices": [{"text", "label"}]}, "answerKey"}
//   piqa            {"goal", "sol1", "sol2"} + labels file   "Question: goal\nAnswer:"
//                   or "label"                               / " " + sol
//   boolq           super_glue: {"question", "passage",      "passage\nQuestion: question?
//                   "label": 0|1}; or {..., "answer": bool}  \nAnswer:" / " no", " yes"
//   lambada         lambada_openai: {"text"}                 text before its last " " /
//                                                            " " + what follows it
//   gcide           {"definition", "choices": [headwords],   headword / ", " + definition
//                   "label"}
// (preprocess: python_text.h.) gcide is ours (data/gcide_task.h): the corpus writes an entry
// as "Headword, n. definition", so each candidate headword is a context and the definition
// the shared continuation; the model scores how well each headword predicts the definition.
// Thread-safe free functions.
#ifndef XMOD_MODEL_EVAL_TASKS_H_
#define XMOD_MODEL_EVAL_TASKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xmod {

// One candidate answer: the log-likelihood of `continuation` after `context` is its score.
struct Choice {
  std::string context;
  std::string continuation;
  // The answer's length in characters (code points), without the delimiter that starts the
  // continuation: acc_norm's divisor, as the harness's len(choice).
  int64_t answer_chars = 0;
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
