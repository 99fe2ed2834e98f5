// The xmod-fit command as a library: options in, a report out on a stream: a table, or
// with --output json the xmod.v1.FitReport message (common/proto_json.h). main.cc only parses flags
// into FitCommandOptions. Thread-compatible.
#ifndef XMOD_FITTER_FIT_COMMAND_H_
#define XMOD_FITTER_FIT_COMMAND_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "fitter/de_search.h"

namespace xmod::fitter {

struct FitCommandOptions {
  std::string csv;    // --csv FILE (n_act,L,K,A,delta[,group][,held_out][,sweep])
  std::string db;     // --db FILE (the coordinator's SQLite database) ...
  int64_t sweep = 0;  // ... with --sweep ID
  uint64_t seed = 1;
  std::string output = "table";        // "table" or "json" (xmod.v1.FitReport)
  std::vector<std::string> recommend;  // each "C,L,N_act", e.g. "1e20,2048,556e6"
  std::vector<int> ks;                 // candidate K (empty: 1..32)
  std::vector<double> as;              // candidate A (empty: 0.5,1,2,3,4,5)
  double max_total_params = 0;         // cap on N for recommendations (0 = none)
  int bootstrap = 0;                   // bootstrap refits (0 = none)
  int threads = 2;
  bool cross_validate = true;
  std::string law = "reduced";         // --law: reduced (Eq. 14) or full (Eq. 24)
  bool compare_laws = false;           // --compare-laws: paper C.1 (law_comparison.h)
  int population = 32;                 // DE population
  int generations = 400;               // DE generations at most
  double ftol = SearchOptions{}.ftol;  // DE stop: best and worst fitness differ by less
};

// Reads the input, fits, validates, recommends, with --compare-laws compares the full and
// the reduced candidate law (C.1), and prints. INVALID_ARGUMENT for bad
// options (naming the flag) or bad data (naming the group); nothing is printed then.
absl::Status RunFitCommand(const FitCommandOptions& options, std::ostream& out);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_FIT_COMMAND_H_
