// The offline zero-shot task `gcide` (model/eval/tasks.h): from the dict-gcide corpus text
// (gcide_text.h), lines {"definition", "choices": [headwords], "label"} — one entry's
// definition, its own headword and distractor headwords of other entries, in a seeded
// random order. Only the corpus's validation documents are used (the encoder's split,
// corpus_encoder.h), so the model never trained on the entries it is asked about.
//
// An entry qualifies when its first line reads "Headword, pos. text" or "Headword pos. text"
// with a one-word headword of letters, '-' or '\'' (at least 3 characters), a part of
// speech among n. v. a. adj. adv. prep. conj. interj. pron., and a definition that does not
// contain the headword itself (case-insensitively). The definition is the text from the
// part of speech on, cut at a word boundary to at most `max_definition_bytes`. Headwords
// are unique case-insensitively (the first entry wins); distractors are drawn from the
// other qualifying entries. Deterministic for a given text and options (std::mt19937_64,
// which the standard fully specifies). Thread-safe free functions.
#ifndef XMOD_DATA_GCIDE_TASK_H_
#define XMOD_DATA_GCIDE_TASK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xmod {

struct GcideTaskOptions {
  double val_fraction = 0.05;  // the corpus encoder's --val_fraction
  int max_examples = 1000;     // spread evenly over the qualifying entries
  int choices = 4;             // the right headword and choices - 1 distractors
  uint64_t seed = 1;
  size_t max_definition_bytes = 200;
};

struct GcideTaskStats {
  int64_t documents = 0;   // documents of the corpus
  int64_t qualifying = 0;  // validation documents that qualify
  int64_t examples = 0;    // lines written
};

// The task's JSONL for `corpus_text`. INVALID_ARGUMENT naming the option if one is out of
// range or fewer than `choices` entries qualify.
absl::StatusOr<std::string> MakeGcideTask(absl::string_view corpus_text,
                                          const GcideTaskOptions& options, GcideTaskStats* stats);

// Reads `text_path`, writes MakeGcideTask's lines to `out_path` atomically.
absl::StatusOr<GcideTaskStats> WriteGcideTask(const std::string& text_path,
                                              const std::string& out_path,
                                              const GcideTaskOptions& options);

}  // namespace xmod

#endif  // XMOD_DATA_GCIDE_TASK_H_
