// xmod-design-sim: compares the paper's B.4 grid with the law-guided adaptive design on
// synthetic sweeps drawn from known law parameters (fitter/design_sim.h). Parses flags into
// DesignSimOptions, runs RunDesignSim and prints xmod.v1.DesignSimReport.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/build_info.h"
#include "common/proto_json.h"
#include "fitter/design_sim.h"
#include "fitter/law_json.h"

namespace {

void AddFlags(CLI::App& app, xmod::fitter::DesignSimOptions& options, std::string& truth_file,
              std::string& output) {
  app.set_version_flag("--version", xmod::VersionLine("xmod-design-sim"));
  app.add_option("--truth", truth_file,
                 "JSON object of law parameters with xmod-fit's params keys (e, u, eta_n, "
                 "rho_n, w, eta_l, rho_l, z, rho_k, rho_a)")
      ->required();
  app.add_option("--sigma", options.sigma, "Gaussian noise sd of every run's delta (nats)");
  app.add_option("--strategy", options.strategy, "grid (paper B.4) or adaptive")
      ->check(CLI::IsMember({"grid", "adaptive"}));
  app.add_option("--reps", options.reps, "repetitions averaged");
  app.add_option("--seed", options.seed, "seed of noise, run order and fits");
  app.add_option("--output", output, "json (the only format)")->check(CLI::IsMember({"json"}));
  app.add_option("--slots", options.slots, "runs trained at once");
  app.add_option("--budget_fraction", options.budget_fraction,
                 "adaptive: compute budget as a share of the grid's compute");
  app.add_option("--tolerance", options.tolerance,
                 "adaptive: stop when every target's regret bound is at most this (nats) "
                 "and the answers held two decisions");
  app.add_option("--confidence", options.confidence,
                 "adaptive: confidence of the regret bound the design stops on, in (0, 1)");
  app.add_option("--bootstrap", options.bootstrap_samples, "ensemble members of every fit");
  app.add_option("--marks", options.marks,
                 "adaptive: evaluation marks per run; > 1 simulates learning curves, partial "
                 "forecasts, early stopping and resumption");
  app.add_option("--curve_alpha", options.curve_alpha, "learning curves: exponent α");
  app.add_option("--curve_slope_mean", options.curve_slope_mean,
                 "learning curves: mean of the per-run slope b (nats)");
  app.add_option("--curve_slope_sd", options.curve_slope_sd,
                 "learning curves: sd of the per-run slope b (nats)");
}

// The law parameters in `truth_file`; false, after saying why on stderr, when there are none.
bool ReadTruth(const std::string& truth_file, xmod::fitter::LawParams* truth) {
  std::ifstream in(truth_file);
  if (!in) {
    std::cerr << "xmod-design-sim: --truth: cannot read " << truth_file << "\n";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<xmod::fitter::LawParams> parsed = xmod::fitter::LawParamsFromJson(text.str());
  if (!parsed.ok()) {
    std::cerr << "xmod-design-sim: --truth " << truth_file << ": " << parsed.status().message()
              << "\n";
    return false;
  }
  *truth = *parsed;
  return true;
}

// Runs the simulation and prints its report as JSON; the exit status.
int PrintReport(const xmod::fitter::DesignSimOptions& options) {
  absl::StatusOr<xmod::v1::DesignSimReport> report = xmod::fitter::RunDesignSim(options);
  if (!report.ok()) {
    std::cerr << "xmod-design-sim: " << report.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::string> json = xmod::ProtoJson(*report);
  if (!json.ok()) {
    std::cerr << "xmod-design-sim: " << json.status().message() << "\n";
    return 2;
  }
  std::cout << *json;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  xmod::fitter::DesignSimOptions options;
  std::string truth_file;
  std::string output = "json";
  CLI::App app{
      "xmod-design-sim: regret of the B.4 grid or the adaptive design on sweeps drawn from a "
      "known law"};
  AddFlags(app, options, truth_file, output);
  CLI11_PARSE(app, argc, argv);
  if (!ReadTruth(truth_file, &options.truth)) return 2;
  return PrintReport(options);
}
