// xmod-eval's pairs mode: raw (context, continuation) pairs in, their log-likelihoods out —
// what an lm-evaluation-harness model adapter (model/eval/harness/xmod_lm.py) asks of an xmod
// checkpoint for the harness's loglikelihood requests.
//
//   in  (JSONL, one a line):  {"context": "...", "continuation": "..."}
//   out (JSONL, one a line):  {"loglikelihood": -12.5, "is_greedy": false, "tokens": 3}
//
// loglikelihood is the continuation's summed log-probability in nats (printed to round-trip
// as a double; -Infinity / NaN as Python's json reads them), is_greedy whether greedy
// decoding reproduces every continuation token, tokens how many were scored (fewer than the
// continuation's when the window cut it; scorer.h). The input is another process's: a file
// of at most kMaxPairsFileBytes, at most kMaxPairs pairs, each pair's texts at most
// kMaxPairTextBytes together, both strings, the continuation non-empty; anything else is
// INVALID_ARGUMENT naming "path:line" (OUT_OF_RANGE for a file too large).
// Thread-safe free functions.
#ifndef XMOD_MODEL_EVAL_PAIRS_H_
#define XMOD_MODEL_EVAL_PAIRS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/eval/scorer.h"
#include "model/eval/tasks.h"

namespace xmod {

inline constexpr int64_t kMaxPairsFileBytes = int64_t{256} << 20;
inline constexpr int64_t kMaxPairs = 1'000'000;
inline constexpr int64_t kMaxPairTextBytes = int64_t{1} << 20;

// The pairs of `path`, as choices (answer_chars unused).
absl::StatusOr<std::vector<Choice>> ReadPairs(const std::string& path);

// One output line (no newline) for `score`.
std::string PairScoreJson(const ContinuationScore& score);

}  // namespace xmod

#endif  // XMOD_MODEL_EVAL_PAIRS_H_
