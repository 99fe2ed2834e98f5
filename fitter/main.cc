// xmod-fit: the scaling-law fit offline, on a CSV of Δ observations or on a sweep in the
// coordinator's database. Parses flags into FitCommandOptions and runs RunFitCommand.
#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>

#include "common/command_line.h"
#include "fitter/fit_command.h"

int main(int argc, char** argv) {
  xmod::fitter::FitCommandOptions options;
  CLI::App app{"xmod-fit: fit the X-MoD scaling law (paper Eq. 14) and recommend (K, A)"};
  xmod::AddVersionFlag(app, "xmod-fit");
  app.add_option(
      "--csv", options.csv,
      "CSV with header n_act,L,K,A,delta[,group][,held_out][,sweep]; sweep: kxl, nact or axk "
      "(fits the two stages by sweep, paper B.5)");
  app.add_option("--db", options.db, "the coordinator's SQLite database (read-only)");
  app.add_option("--sweep", options.sweep, "sweep id in --db");
  app.add_option("--seed", options.seed, "seed of differential evolution and bootstrap");
  app.add_option("--output", options.output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  app.add_option("--recommend", options.recommend,
                 "\"C,L,N_act\" to recommend (K*, A*) for (repeatable), e.g. 1e20,2048,556e6");
  app.add_option("--ks", options.ks, "candidate K values (default 1..32)")->delimiter(',');
  app.add_option("--as", options.as, "candidate A values (default 0.5,1,2,3,4,5)")->delimiter(',');
  app.add_option("--max_total_params", options.max_total_params,
                 "recommend only configurations with at most this many total parameters");
  app.add_option("--bootstrap", options.bootstrap, "bootstrap refits over runs (0 = none)");
  app.add_option("--threads", options.threads, "threads for the bootstrap");
  app.add_option("--population", options.population, "differential-evolution population");
  app.add_option("--generations", options.generations, "differential-evolution generations");
  app.add_option("--ftol", options.ftol,
                 "differential evolution stops when best and worst SSE/SST differ by less");
  bool no_cv = false;
  app.add_flag("--no_cv", no_cv, "skip the grouped cross-validation");
  app.add_option("--law", options.law,
                 "reduced (Eq. 14) or full (Eq. 24, with the exposure term; needs C)")
      ->check(CLI::IsMember({"reduced", "full"}));
  app.add_flag("--compare-laws,--compare_laws", options.compare_laws,
               "also fit the full candidate law (Eq. 24) and the reduced one (Eq. 14) and "
               "compare their grouped-CV RMSE on the same folds (paper C.1)");
  if (std::optional<int> exit = xmod::ParseCommandLine(app, argc, argv)) return *exit;
  options.cross_validate = !no_cv;

  const absl::Status status = xmod::fitter::RunFitCommand(options, std::cout);
  if (!status.ok()) {
    std::cerr << "xmod-fit: " << status.message() << "\n";
    return 2;
  }
  return 0;
}
