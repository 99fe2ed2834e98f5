// The paper's B.3 pilot selection by measured loss (Appendix B.3, Fig. 4, §4.3): "for each
// MoE baseline, we then select the lowest-loss X-MoD configuration in the pilot grid with
// the same N_act and nominal sparsity K, without exceeding its total-parameter budget".
//
// The rule as implemented (docs/paper-fidelity.md, "Pilot selection by measured loss"):
//  - A configuration is the set of a sweep's runs whose RunSpecs differ only in the seed
//    (ReplicateKey); its loss is the mean final validation loss (run_summary.final_val_loss,
//    the loss at the budget) of its SUCCEEDED runs. A configuration with a QUEUED or RUNNING
//    run is PENDING and no candidate; one whose runs all failed or were cancelled has no
//    result. Both are listed, never silently dropped.
//  - Nominal K: X-MoD's K; a MoE's routed experts over its active experts, shared ones
//    included (B.3: "64/8 = 8"; 6:64+2 has K = 64 / 8 = 8). A MoE whose ratio is not whole
//    matches no X-MoD (k = 0).
//  - An X-MoD configuration is compared with a MoE when both have the same backbone (N_act),
//    nominal K, context length L and training budget C (the pilot is matched-budget), and it
//    is within the MoE's budget when its total parameters N do not exceed the MoE's: "without
//    exceeding" — N_X-MoD <= N_MoE, the boundary inclusive.
//  - The pick is the within-budget configuration of lowest measured loss; ties go to fewer
//    total parameters, then the smaller A. A pick is provisional while a within-budget
//    configuration is still pending.
//  - A MoE is a baseline (§4.3: "the lowest-loss baselines in their respective sparsity
//    groups") when its measured loss is the lowest of the measured MoE configurations of its
//    (backbone, L, C, K) group; ties as above.
// Pure functions of their arguments; thread-safe.
#ifndef XMOD_FITTER_PILOT_SELECTION_H_
#define XMOD_FITTER_PILOT_SELECTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "xmod/v1/pilot.pb.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/types.pb.h"

namespace xmod::fitter {

// One run of a pilot sweep as the results database holds it.
struct PilotRun {
  int64_t run_id = 0;
  xmod::v1::RunState state = xmod::v1::RUN_STATE_UNSPECIFIED;
  xmod::v1::Architecture arch = xmod::v1::ARCHITECTURE_UNSPECIFIED;
  std::string backbone;
  int seq_len = 0;
  double flop_budget = 0;
  int k = 1;                             // runs.k (1 for MoE)
  std::optional<double> a;               // X-MoD's anchor stride
  std::string moe;                       // "active:total+shared" for MoE (runs.moe), else ""
  double total_params = 0;               // runs.total_params
  std::optional<double> final_val_loss;  // run_summary.final_val_loss; nullopt: none yet
  std::string replicate_key;  // equal for runs that differ only in the seed (ReplicateKey)
};

// The identity of a run's configuration: its RunSpec without seed, run id, attempt and
// checkpoint folder, serialized deterministically.
std::string ReplicateKey(xmod::v1::RunSpec spec);

// The selection of `runs` (every run of sweep `sweep_id`). FAILED_PRECONDITION when the runs
// have no MoE or no X-MoD configuration (not a pilot) or none is measured yet (naming how many
// are pending); INVALID_ARGUMENT for a MoE run whose moe text cannot be read.
absl::StatusOr<xmod::v1::SelectPilotResponse> SelectPilot(int64_t sweep_id,
                                                          const std::vector<PilotRun>& runs);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_PILOT_SELECTION_H_
