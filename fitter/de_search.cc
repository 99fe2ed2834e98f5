// Differential evolution + compass-search polish with pagmo2. See de_search.h.
#include "fitter/de_search.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <pagmo/algorithm.hpp>
#include <pagmo/algorithms/compass_search.hpp>
#include <pagmo/algorithms/de.hpp>
#include <pagmo/population.hpp>
#include <pagmo/problem.hpp>
#include <utility>

namespace xmod::fitter {
namespace {

// A pagmo user-defined problem around the objective. pagmo copies problems, so the
// objective is shared, and evaluations are counted by pagmo itself.
struct BoxProblem {
  std::shared_ptr<const Objective> f;
  std::vector<double> lower;
  std::vector<double> upper;
  const std::atomic<bool>* cancel = nullptr;

  pagmo::vector_double fitness(const pagmo::vector_double& x) const {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      return {std::numeric_limits<double>::max()};
    }
    const double v = (*f)(x);
    return {std::isfinite(v) ? v : std::numeric_limits<double>::max()};
  }
  std::pair<pagmo::vector_double, pagmo::vector_double> get_bounds() const {
    return {lower, upper};
  }
  // Serial evaluation keeps results independent of thread scheduling.
  pagmo::thread_safety get_thread_safety() const { return pagmo::thread_safety::none; }
};

}  // namespace

SearchResult MinimizeBox(const Objective& f, const std::vector<double>& lower,
                         const std::vector<double>& upper, const SearchOptions& options) {
  CHECK_EQ(lower.size(), upper.size());
  CHECK_GE(options.population, 5);
  BoxProblem udp{std::make_shared<const Objective>(f), lower, upper, options.cancel};
  pagmo::problem problem(udp);

  // pagmo seeds are unsigned; fold the 64-bit seed so nearby seeds stay distinct.
  const auto seed32 = static_cast<unsigned>(options.seed ^ (options.seed >> 32));
  pagmo::population pop(problem, static_cast<pagmo::population::size_type>(options.population),
                        seed32);
  for (size_t i = 0; i < options.initial_points.size() && i < pop.size(); ++i) {
    std::vector<double> x = options.initial_points[i];
    CHECK_EQ(x.size(), lower.size());
    for (size_t d = 0; d < x.size(); ++d) x[d] = std::clamp(x[d], lower[d], upper[d]);
    pop.set_x(i, x);
  }

  pagmo::algorithm de(pagmo::de(static_cast<unsigned>(options.generations), 0.8, 0.9,
                                /*variant=*/2u, options.ftol, options.xtol, seed32 + 1u));
  pop = de.evolve(pop);
  long evaluations = static_cast<long>(pop.get_problem().get_fevals());

  if (options.polish) {
    pagmo::population single(problem, 0u, seed32 + 2u);
    single.push_back(pop.champion_x(), pop.champion_f());
    pagmo::algorithm polish(pagmo::compass_search(static_cast<unsigned>(options.polish_evaluations),
                                                  /*start_range=*/0.05,
                                                  /*stop_range=*/1e-9, /*reduction_coeff=*/0.5));
    single = polish.evolve(single);
    evaluations += static_cast<long>(single.get_problem().get_fevals());
    if (single.champion_f()[0] <= pop.champion_f()[0]) {
      pop.push_back(single.champion_x(), single.champion_f());
    }
  }

  SearchResult result;
  result.x = pop.champion_x();
  result.f = pop.champion_f()[0];
  result.evaluations = evaluations;
  result.at_bound.resize(lower.size());
  for (size_t d = 0; d < lower.size(); ++d) {
    const double tol = 1e-4 * (upper[d] - lower[d]);
    result.at_bound[d] = result.x[d] <= lower[d] + tol || result.x[d] >= upper[d] - tol;
  }
  return result;
}

}  // namespace xmod::fitter
