// Synthetic sweeps drawn from known law parameters, for tests and benchmarks: the
// paper's Appendix B.4 design (K×L sweep at 556M and A = 1, N_act sweep at L = 32k,
// A×K sweep at 165M and L = 32k), 109 in-range observations like the paper's fit (C.1),
// optionally the prespecified out-of-range extensions (L = 64k; N_act = 1.65B), with
// Gaussian noise on Δ. Deterministic under the seed. Pure functions; thread-safe.
#ifndef XMOD_FITTER_SYNTHETIC_H_
#define XMOD_FITTER_SYNTHETIC_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/law.h"
#include "fitter/observations.h"

namespace xmod::fitter {

struct SyntheticOptions {
  LawParams truth = Table8Params();
  double sigma = 0.003;  // Gaussian noise on Δ (nats)
  uint64_t seed = 1;
  bool out_of_range = false;  // add the held-out L = 64k and N_act = 1.65B runs
  // Tag every row with its B.4 sweep (Observation::sweeps), as three separate sweeps would
  // run it: the A x K sweep then has its own A = 1 runs at K ∈ {4, 8, 12, 16} (24 axk rows,
  // 113 in range), and the 556M, 32k runs belong to both kxl and nact.
  bool sweep_roles = false;
  // Added to the Δ of every axk row (a baseline shift of that sweep); needs sweep_roles.
  double axk_shift = 0;
  // Training FLOPs C of every row (0 = unknown, as for Δ given directly). The exposure
  // term of a full-law truth (truth.v != 0, law.h Eq. 24) needs it.
  double flops = 0;
};

// K grid of the K×L and N_act sweeps; K = 3 is added at L = 2k only (B.4).
const std::vector<int>& PaperSweepKs();

// The B.4 design: 5 L × 11 K + (K = 3 at 2k) at 556M; 3 more N_act × 11 K at 32k;
// A ∈ {0.5, 2, 3, 4, 5} × K ∈ {4, 8, 12, 16} at 165M, 32k (its A = 1 runs are those of the
// N_act sweep). 109 in-range observations. Errors from the accounting pass through.
absl::StatusOr<std::vector<Observation>> PaperSweepObservations(const SyntheticOptions& options);

// Run curves that produce `observations` exactly (before noise): per (L, backbone) a dense
// curve loss(C) = 2.5 + 40·(C/1e15)^−0.12 at 8 FLOP marks up to 1e19, and per observation
// a sparse curve offset by its Δ. For BuildObservations / FitSweep tests.
std::vector<RunCurve> RunCurvesFor(const std::vector<Observation>& observations);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_SYNTHETIC_H_
