// Writes the synthetic Appendix B.4 sweep (Table 8 parameters + Gaussian noise) as the
// xmod-fit CSV, the common input of the C++ and SciPy fits in run_bench.sh.
// Usage: fitter_synthetic_csv OUT.csv [--sigma 0.003] [--seed 1] [--out_of_range]
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "fitter/csv_input.h"
#include "fitter/synthetic.h"

int main(int argc, char** argv) {
  std::string out_path;
  xmod::fitter::SyntheticOptions options;
  CLI::App app{"Write the synthetic B.4 sweep as an xmod-fit CSV"};
  app.add_option("out", out_path, "output CSV")->required();
  app.add_option("--sigma", options.sigma, "Gaussian noise on delta");
  app.add_option("--seed", options.seed, "noise seed");
  app.add_flag("--out_of_range", options.out_of_range, "add the held-out 64k / 1.65B runs");
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<std::vector<xmod::fitter::Observation>> obs =
      xmod::fitter::PaperSweepObservations(options);
  if (!obs.ok()) {
    std::cerr << obs.status().message() << "\n";
    return 1;
  }
  std::ofstream(out_path) << xmod::fitter::WriteDeltaCsv(*obs);
  return 0;
}
