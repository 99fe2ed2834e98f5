// Observations of the law: one per sparse (X-MoD, K >= 2) run, Δ = L_sparse(C) − L̂_dense(C)
// at the run's final logged training FLOPs C, the dense loss interpolated on the dense
// curve of the same L and backbone (dense_interp.h; paper B.5). Also builds observations
// directly from given Δ values (the CSV path of xmod-fit), and names the sweep of the B.4
// design each observation belongs to. Pure functions; thread-safe.
#ifndef XMOD_FITTER_OBSERVATIONS_H_
#define XMOD_FITTER_OBSERVATIONS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fitter/dense_interp.h"
#include "fitter/law.h"
#include "xmod/v1/spec.pb.h"

namespace xmod::fitter {

// The sweeps of the paper's B.4 design, as the two-stage fit uses them (two_stage.h, B.5):
// the K x L sweep (556M, A = 1) and the N_act sweep (L = 32k, A = 1) feed stage 1; every
// row of the A x K sweep (165M, 32k; its A = 1 rows included) feeds stage 2.
enum class SweepRole { kKxl, kNact, kAxk };

// "kxl", "nact", "axk".
const char* SweepRoleName(SweepRole role);

// The role a run's grid label (GridSpec.label) names: the role's name, alone or followed by
// '-' and anything ("kxl", "kxl-k3", "kxl-64k" are kxl; "nact-1.65B" is nact); nullopt for
// any other label ("pilot", "xmod", "").
std::optional<SweepRole> SweepRoleOfLabel(absl::string_view label);

// The roles of a run's stored label: the labels of the grids that share the run, joined by
// '+' (sweep expansion keeps a run several grids produce once and joins their labels, as the
// paper's 165M A = 1 runs belong to both the N_act and the A x K sweep), each read by
// SweepRoleOfLabel; labels naming no role are skipped, each role listed once.
std::vector<SweepRole> SweepRolesOfLabels(absl::string_view labels);

// One run's validation curve as the coordinator stores it.
struct RunCurve {
  int64_t run_id = 0;
  std::string name;  // e.g. "xmod-556M-L2048-K4-A1" (used in messages)
  xmod::v1::Architecture arch = xmod::v1::ARCHITECTURE_UNSPECIFIED;
  std::string backbone;            // preset name, e.g. "556M"
  int seq_len = 0;                 // L
  int k = 1;                       // K (ignored for DENSE)
  double a = 1;                    // A (ignored for DENSE)
  int n0 = 4;                      // dense prefix N0 of the layer plan
  bool held_out = false;           // out-of-range: predicted, never fitted (FitPlan)
  double flop_budget = 0;          // training FLOPs the run was asked to spend (0 = unknown)
  uint64_t seed = 0;               // training seed; with the budget, the run's identity
  std::string label;               // grid label(s), '+'-joined; name its roles (SweepRolesOfLabels)
  std::vector<CurvePoint> points;  // val/loss against cumulative training FLOPs
};

struct Observation {
  int64_t run_id = 0;    // the run's id; 0 for CSV input
  std::string name;      // run name, or "row N" for CSV input
  std::string backbone;  // preset name
  double n_act = 0;      // nominal N_act of the backbone
  int seq_len = 0;
  int k = 2;
  double a = 1;
  int n0 = 4;                        // dense prefix N0 of the layer plan
  double capacity_ratio = 1;         // N(K,A)/N_act, layers only
  double exposure = 1;               // D/D_D at matched C (law_backbones.h ExposureOf; Eq. 24)
  double dense_tokens_per_flop = 0;  // 1/φ_dense: D_D = flops x this (Eq. 24)
  double flops = 0;                  // C (0 when Δ was given directly)
  double dense_loss = 0;             // L̂_dense(C) (0 when Δ was given directly)
  double delta = 0;                  // Δ (the mean over `replicates` runs)
  int replicates = 1;                // runs of this configuration averaged (GridSpec.seeds)
  double flop_budget = 0;            // the run's training-FLOP budget (0 = unknown, CSV)
  uint64_t seed = 0;                 // the run's training seed (shared_runs.h)
  bool held_out = false;             // excluded from the fit
  std::vector<std::string> groups;   // explicit CV groups; empty = automatic (validation.h)
  // The B.4 sweeps the run belongs to (a run shared by two sweeps, e.g. the paper's 165M
  // A = 1 runs of the N_act and A x K sweeps, names both). Empty: no design role; a fit
  // whose observations have no roles assigns stages by A alone (two_stage.h).
  std::vector<SweepRole> sweeps;

  bool InSweep(SweepRole role) const;
  double dense_tokens() const { return flops * dense_tokens_per_flop; }  // D_D (0 without C)
  LawPoint point() const {
    return {n_act, capacity_ratio, double(seq_len), double(k), a, exposure, dense_tokens()};
  }
  // "L=2048 N_act=556M K=4 A=1 (name)": how errors name an observation's group.
  std::string Describe() const;
};

struct ObservationOptions {
  // A sparse run may end up to this relative FLOP margin past its dense reference's last
  // evaluation (runs stop at the first step past the budget); C is then the dense end and
  // both curves are interpolated there. Anything further out is an error.
  double end_tolerance = 0.02;
};

// The roles of runs in a fit: DENSE runs and X-MoD K = 1 are dense references; X-MoD runs
// with K >= 2 are observations; other architectures (MoD, MoE, controls) are not fitted.
bool IsDenseReference(const RunCurve& run);
bool IsObservation(const RunCurve& run);

// While a sweep runs: drops the sparse runs whose (L, backbone) group has no dense
// reference among `runs` yet (their reference is still coming). Returns how many.
int DropSparseWithoutDense(std::vector<RunCurve>* runs);

// Observations from run curves, one per sparse run in the order of `runs`, without merging
// shared runs or averaging replicates (fit_observations.h's BuildObservations does both; a
// study assigns its members' roles before merging). DENSE runs (and K = 1) are references;
// X-MoD runs with K >= 2 become observations, in the sweeps their label names
// (SweepRolesOfLabels); other architectures (MoD, MoE, controls) are not part of the law and
// are skipped. INVALID_ARGUMENT naming the run and its (L, backbone) group for a non-finite
// loss or FLOP value, an empty curve, or a sparse run without a dense reference whose FLOP
// range covers its C; errors from the accounting name the configuration.
absl::StatusOr<std::vector<Observation>> BuildRunObservations(
    const std::vector<RunCurve>& runs, const ObservationOptions& options = {});
// Replicates (GridSpec.seeds) in BuildObservations: a dense reference is the mean of the
// group's dense runs that end where the chosen one ends (same budget, other seeds), and the
// observations of one configuration (backbone, L, K, A, N0, held-out flag and sweeps) are
// merged into one whose Δ, C and dense loss are their means (AverageReplicates, first
// occurrence's name and run id), so seed-to-seed noise averages out before the fit.
std::vector<Observation> AverageReplicates(std::vector<Observation> observations);

// An observation from a given Δ (xmod-fit --csv). INVALID_ARGUMENT naming `name` for a
// non-finite Δ, K < 2, A <= 0, L < K, or a backbone the accounting does not know.
absl::StatusOr<Observation> MakeDeltaObservation(std::string name, const std::string& backbone,
                                                 int seq_len, int k, double a, double delta,
                                                 int n0 = 4);

// "L=2048 backbone=556M".
std::string DenseGroupName(int seq_len, const std::string& backbone);

// The dense reference curves of `runs` by DenseGroupName; where a group has several dense
// runs, the one reaching the most FLOPs. Errors as BuildObservations.
absl::StatusOr<std::map<std::string, LossCurve>> DenseCurves(const std::vector<RunCurve>& runs);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_OBSERVATIONS_H_
