// The harness's standard errors: see stderr.h.
#include "model/eval/stderr.h"

#include <algorithm>
#include <cmath>

#include "model/eval/python_random.h"

namespace xmod {
namespace {

// The harness's sample_stddev(): sqrt(sum((x - mean)^2) / (n - 1)).
double SampleStddev(const std::vector<double>& xs) {
  const double mu = HarnessMean(xs);
  double squares = 0;
  for (double x : xs) squares += (x - mu) * (x - mu);
  return std::sqrt(squares / static_cast<double>(xs.size() - 1));
}

bool Reported(const std::vector<double>& xs, int iters) { return xs.size() > 1 && iters > 0; }

}  // namespace

double HarnessMean(const std::vector<double>& xs) {
  double sum = 0;
  for (double x : xs) sum += x;
  return sum / static_cast<double>(xs.size());
}

double HarnessPerplexity(const std::vector<double>& logliks) {
  return std::exp(-HarnessMean(logliks));
}

std::optional<double> MeanStderr(const std::vector<double>& xs, int iters) {
  if (!Reported(xs, iters)) return std::nullopt;
  return SampleStddev(xs) / std::sqrt(static_cast<double>(xs.size()));
}

std::optional<double> BootstrapStderr(
    absl::FunctionRef<double(const std::vector<double>&)> statistic, const std::vector<double>& xs,
    int iters) {
  if (!Reported(xs, iters)) return std::nullopt;
  const int chunk = std::min(1000, iters);
  std::vector<double> replicates;
  replicates.reserve(static_cast<size_t>(iters / chunk) * chunk);
  std::vector<double> sample(xs.size());
  for (int i = 0; i < iters / chunk; ++i) {
    PythonRandom random(static_cast<uint64_t>(i));
    for (int r = 0; r < chunk; ++r) {
      for (double& x : sample) x = xs[random.ChoiceIndex(xs.size())];  // rnd.choices(xs, k=n)
      replicates.push_back(statistic(sample));
    }
  }
  return SampleStddev(replicates);
}

}  // namespace xmod
