// stderr.h against lm-evaluation-harness 0.4.13: the expected values are the harness's
// lm_eval.api.metrics functions on the same numbers (mean_stderr; bootstrap_stderr with
// DISABLE_MULTIPROC=1, the same draws as its process pool). tests/eval/harness_parity_test.sh
// checks the same through the harness's whole evaluation.
#include "model/eval/stderr.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(Stderr, MeanStderrIsTheSampleStandardDeviationOverRootN) {
  const std::vector<double> acc = {1, 0, 1, 1, 0, 0, 1};
  ASSERT_TRUE(MeanStderr(acc, kHarnessBootstrapIters).has_value());
  EXPECT_NEAR(*MeanStderr(acc, kHarnessBootstrapIters), 0.20203050891044214, 1e-15);
  EXPECT_EQ(*MeanStderr({1, 1, 1}, 1000), 0.0);
  // The harness's "N/A": one document, or bootstrap_iters = 0.
  EXPECT_FALSE(MeanStderr({1}, 1000).has_value());
  EXPECT_FALSE(MeanStderr(acc, 0).has_value());
}

// bootstrap_stderr(perplexity, xs, iters): chunks of min(1000, iters) resamples, chunk i drawn
// by random.Random(i); 2500 iterations make two whole chunks, as 2000 do.
TEST(Stderr, PerplexityBootstrapIsTheHarnesss) {
  const std::vector<double> logliks = {-2.0, -6.0, -1.5, -3.25, -0.5};
  EXPECT_DOUBLE_EQ(HarnessPerplexity(logliks), std::exp(2.65));
  for (auto [iters, expected] : std::vector<std::pair<int, double>>{
           {2000, 24.891392533019825}, {2500, 24.891392533019825}, {500, 19.290124067185655}}) {
    SCOPED_TRACE(iters);
    std::optional<double> se = BootstrapStderr(HarnessPerplexity, logliks, iters);
    ASSERT_TRUE(se.has_value());
    EXPECT_NEAR(*se, expected, 1e-12);
  }
  EXPECT_FALSE(BootstrapStderr(HarnessPerplexity, {-2.0}, 1000).has_value());
  EXPECT_FALSE(BootstrapStderr(HarnessPerplexity, logliks, 0).has_value());
}

}  // namespace
}  // namespace xmod
