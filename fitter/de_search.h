// Global minimization of a cheap objective over a box: differential evolution (pagmo2's
// `pagmo::de`) followed by a local polish (pagmo's `compass_search`). Used for the law's
// exponents, with the exact linear solve inside the objective (two_stage.h).
// Deterministic under `seed`: the population and the algorithm are both seeded from it,
// and the objective is evaluated serially. Thread-compatible: concurrent calls with
// separate objectives are fine.
#ifndef XMOD_FITTER_DE_SEARCH_H_
#define XMOD_FITTER_DE_SEARCH_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

namespace xmod::fitter {

struct SearchOptions {
  uint64_t seed = 1;
  int population = 32;    // individuals (>= 5)
  int generations = 400;  // DE generations at most
  double ftol = 1e-10;    // DE stops when best and worst fitness differ by less
  double xtol = 1e-8;     // ... or when the population collapses this far
  bool polish = true;     // compass search from the DE champion
  int polish_evaluations = 3000;
  // Points placed into the initial population (e.g. a previous fit), clipped to the box.
  std::vector<std::vector<double>> initial_points;
  // When *cancel becomes true the search winds down at once (every later evaluation counts
  // as +infinity, so the remaining generations cost next to nothing) and its result means
  // nothing; callers check Cancelled(). Null = not cancellable.
  const std::atomic<bool>* cancel = nullptr;
};

inline bool Cancelled(const SearchOptions& options) {
  return options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed);
}

struct SearchResult {
  std::vector<double> x;
  double f = 0;
  long evaluations = 0;
  std::vector<bool> at_bound;  // x[i] within 1e-4 of the box width of a bound
};

using Objective = std::function<double(const std::vector<double>&)>;

// Minimizes `f` over [lower, upper] (same sizes, lower < upper). Non-finite objective
// values count as +infinity.
SearchResult MinimizeBox(const Objective& f, const std::vector<double>& lower,
                         const std::vector<double>& upper, const SearchOptions& options);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_DE_SEARCH_H_
