// What a sweep spec is checked against before it is expanded: the sizes it may have
// (SpecLimits) and the options of validation and expansion (ExpansionOptions), shared by
// sweep_validation.h and sweep_expansion.h, which both read them.
#ifndef XMOD_COORDINATOR_SPEC_SPEC_OPTIONS_H_
#define XMOD_COORDINATOR_SPEC_SPEC_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace xmod {

// A run's attempts when the spec sets no max_attempts.
inline constexpr int kDefaultMaxAttempts = 5;

// Sizes a sweep spec may have, so one request cannot make the coordinator expand, store or
// fit without bound.
struct SpecLimits {
  int64_t max_runs = 10000;           // combinations of all grids (before deduplication)
  int max_values = 1000;              // entries of any repeated field (grids, archs, ks, ...)
  int max_string_bytes = 4096;        // any string field (names, globs, presets)
  int max_bootstrap_samples = 10000;  // fit.bootstrap_samples (refits held by one fit)
  // adaptive.bootstrap_samples and ProposeRuns.bootstrap_samples: refits of every decision,
  // whose valuation grows with the square of the ensemble.
  int max_ensemble_size = 1000;
};

struct ExpansionOptions {
  // Absolute directories data.train_glob and data.val_glob must lie under (--data_root,
  // data_roots.h); empty: the globs are neither confined nor looked up.
  std::vector<std::string> data_roots;
  // Require both globs and, with data_roots, that each matches a file under them (the
  // coordinator shares the data filesystem with its workers).
  bool check_data_paths = true;
  SpecLimits limits;
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_SPEC_SPEC_OPTIONS_H_
