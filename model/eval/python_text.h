// The Python string operations that lm-evaluation-harness's task code applies to documents,
// reproduced on UTF-8 text, so that xmod-eval builds the harness's prompts byte for byte:
// str.strip(), str.capitalize(), len() in characters, and HellaSwag's preprocess() (the
// harness's lm_eval/tasks/hellaswag/utils.py). Case mapping and white space come from ICU.
// Thread-safe free functions.
#ifndef XMOD_MODEL_EVAL_PYTHON_TEXT_H_
#define XMOD_MODEL_EVAL_PYTHON_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace xmod {

// Python's len(text): the number of Unicode code points (UTF-8 continuation bytes are not
// counted).
int64_t CodePoints(absl::string_view text);

// Python's text.strip(): leading and trailing characters for which str.isspace() holds
// (Unicode White_Space, plus U+001C..U+001F).
std::string PythonStrip(absl::string_view text);

// Python's text.capitalize(): the first character title-cased, the rest lower-cased (full
// Unicode case mappings, so "ß" at the start becomes "Ss").
std::string PythonCapitalize(absl::string_view text);

// The harness's HellaSwag preprocess(): strip; " [title]" -> ". "; every "[...]" on one line
// removed (re.sub(r"\[.*?\]", "")); then each pair of spaces replaced by one, left to right
// in a single pass (str.replace("  ", " ")).
std::string HellaSwagPreprocess(absl::string_view text);

}  // namespace xmod

#endif  // XMOD_MODEL_EVAL_PYTHON_TEXT_H_
