// CPython's random.Random for integer seeds, reproduced draw for draw, so that xmod-eval
// resamples exactly as lm-evaluation-harness's bootstrap does (lm_eval/api/metrics.py
// bootstrap_stderr: random.Random(i).choices(xs, k=len(xs)) per replicate). CPython
// (Modules/_randommodule.c, Lib/random.py, 3.8 to 3.13):
//   - Random(seed) for an int: MT19937 initialised by init_by_array with |seed| split into
//     32-bit words, least significant first (one word 0 for seed 0);
//   - random(): genrand_res53, (a * 2^26 + b) / 2^53 with a = next() >> 5, b = next() >> 6;
//   - choices(population, k) without weights: population[floor(random() * len)], k times.
// The generator is std::mt19937, whose output and twist are MT19937's; only its initial state
// comes from init_by_array instead of the standard's seeding. Thread-compatible.
#ifndef XMOD_MODEL_EVAL_PYTHON_RANDOM_H_
#define XMOD_MODEL_EVAL_PYTHON_RANDOM_H_

#include <cstddef>
#include <cstdint>
#include <random>

namespace xmod {

class PythonRandom {
 public:
  // Python's random.Random(seed).
  explicit PythonRandom(uint64_t seed);

  // Python's random(): a double in [0, 1) with 53 random bits.
  double Random();

  // The index Python's choices() draws from a population of `n` (> 0) items:
  // floor(random() * n).
  size_t ChoiceIndex(size_t n) { return static_cast<size_t>(Random() * static_cast<double>(n)); }

 private:
  std::mt19937 engine_;
};

}  // namespace xmod

#endif  // XMOD_MODEL_EVAL_PYTHON_RANDOM_H_
