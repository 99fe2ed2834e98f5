// Grid choices: the validated value lists of one GridSpec (sweep_expansion.h), one list per
// axis of its Cartesian product, each value with the path of the spec field it came from so
// that an error found later (accounting, the one-step budget) names that field.
#ifndef XMOD_COORDINATOR_SPEC_GRID_CHOICES_H_
#define XMOD_COORDINATOR_SPEC_GRID_CHOICES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/types.pb.h"

namespace xmod {

// A value and the path of the spec field it came from, for error messages.
template <typename T>
struct Choice {
  T value;
  std::string path;
};

// One combination of a grid: a value of each axis.
struct Combo {
  Choice<xmod::v1::Architecture> arch;
  Choice<std::string> backbone;
  Choice<int> l;
  Choice<int> k;
  Choice<double> a;
  Choice<double> budget;
  Choice<std::string> moe;  // "" unless arch MOE with moe_experts
  Choice<uint64_t> seed;
};

// The per-grid value lists, validated, each entry with its path; never empty (an empty
// repeated field takes its single value from the grid's base model or the spec's training).
struct GridChoices {
  std::vector<Choice<xmod::v1::Architecture>> archs;
  std::vector<Choice<std::string>> backbones;
  std::vector<Choice<int>> ls;
  std::vector<Choice<int>> ks;
  std::vector<Choice<double>> as;
  std::vector<Choice<double>> budgets;
  std::vector<Choice<std::string>> moes;
  std::vector<Choice<uint64_t>> seeds;
  bool replicated = false;  // the grid lists seeds: run names carry them

  // The length of each axis, in Combo order (arch slowest, seed fastest).
  std::vector<size_t> AxisSizes() const;
  // The combination at `index` (one position per axis, as AxisSizes).
  Combo At(const std::vector<size_t>& index) const;
};

// Whether `arch` reads K (every sparse architecture: not DENSE, not MOE) and A (those of them
// with anchors: not MOD either); an architecture that does not ignores the value.
bool UsesK(xmod::v1::Architecture arch);
bool UsesA(xmod::v1::Architecture arch);

// "MOD", "X-MoD", ...: the architecture as an error message names it.
std::string ArchitectureTitle(xmod::v1::Architecture arch);

// The choices of grid `g` of `spec`; INVALID_ARGUMENT naming the field path
// ("grids[0].ks[2]: K must be >= 1, got 0"). An empty list that an architecture of the grid
// needs and whose base value is unset is refused naming the list and that base value
// ("grids[0].ks: MOD needs at least one K (grids[0].base.k is 0)"), so a spec never expands
// to another architecture than the one it names.
absl::StatusOr<GridChoices> GridValues(const xmod::v1::SweepSpec& spec, int g);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_SPEC_GRID_CHOICES_H_
