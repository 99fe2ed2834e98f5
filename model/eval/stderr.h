// Standard errors of zero-shot metrics as lm-evaluation-harness 0.4.13 computes them
// (lm_eval/api/metrics.py: stderr_for_metric, mean_stderr, sample_stddev, bootstrap_stderr;
// lm_eval/evaluator_utils.py _compute_task_aggregations), operation for operation, so that
// xmod-eval's numbers equal the harness's (tests/eval/harness_parity_test.sh):
//   - a metric aggregated by the mean (acc, acc_norm): mean_stderr, the sample standard
//     deviation of the per-document values (Bessel's n - 1) over sqrt(n);
//   - perplexity (LAMBADA's ppl): bootstrap_stderr, the sample standard deviation of the
//     perplexity of `iters` resamples of the documents' log-likelihoods. The resamples come in
//     chunks of min(1000, iters) drawn by random.Random(chunk index) (python_random.h),
//     iters / chunk chunks (the remainder is dropped, as the harness drops it), in order;
//   - none when n = 1 or iters = 0 (the harness's "N/A": bootstrap_iters = 0 turns every
//     standard error off).
// Sums run left to right in double, as Python 3.11's sum() of floats does. Thread-safe free
// functions.
#ifndef XMOD_MODEL_EVAL_STDERR_H_
#define XMOD_MODEL_EVAL_STDERR_H_

#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"

namespace xmod {

// The harness's default bootstrap_iters (simple_evaluate, the lm_eval command line).
inline constexpr int kHarnessBootstrapIters = 100000;

// The harness's mean(): sum(xs) / len(xs). `xs` non-empty.
double HarnessMean(const std::vector<double>& xs);

// The harness's perplexity aggregation: exp(-mean(log-likelihoods)).
double HarnessPerplexity(const std::vector<double>& logliks);

// The harness's mean_stderr(xs) when a standard error is reported (xs.size() > 1 and
// iters > 0); nullopt otherwise.
std::optional<double> MeanStderr(const std::vector<double>& xs, int iters);

// The harness's bootstrap_stderr(statistic, xs, iters) when a standard error is reported
// (xs.size() > 1 and iters > 0); nullopt otherwise. iters >= 2 (one resample has no standard
// deviation; the harness divides by zero).
std::optional<double> BootstrapStderr(
    absl::FunctionRef<double(const std::vector<double>&)> statistic, const std::vector<double>& xs,
    int iters);

}  // namespace xmod

#endif  // XMOD_MODEL_EVAL_STDERR_H_
