// See grid_choices.h. Every axis is collected by one helper (CollectAxis): each entry of the
// repeated field checked and named "grids[g].<field>[i]", or without entries the single
// value the grid's base or the spec's training gives.
#include "coordinator/spec/grid_choices.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/field_path.h"
#include "model/accounting/accounting.h"

namespace xmod {
namespace {

using xmod::v1::Architecture;
using xmod::v1::GridSpec;
using xmod::v1::SweepSpec;

// Appends the entries of `values` (the repeated field at `list_path`) to `out`, each checked
// by `check(value, path)`; when there are none, the single value `fallback()` gives.
template <typename T, typename Values>
absl::Status CollectAxis(const Values& values, const std::string& list_path,
                         const std::function<absl::Status(const T&, const std::string&)>& check,
                         const std::function<absl::StatusOr<Choice<T>>()>& fallback,
                         std::vector<Choice<T>>* out) {
  for (int i = 0; i < values.size(); ++i) {
    const T value = static_cast<T>(values[i]);
    std::string path = absl::StrCat(list_path, "[", i, "]");
    if (absl::Status s = check(value, path); !s.ok()) return s;
    out->push_back({value, std::move(path)});
  }
  if (!out->empty()) return absl::OkStatus();
  absl::StatusOr<Choice<T>> single = fallback();
  if (!single.ok()) return single.status();
  out->push_back(*std::move(single));
  return absl::OkStatus();
}

bool FinitePositive(double v) { return v > 0 && std::isfinite(v); }

// The first of `archs` for which `uses(arch)` holds; nullptr if none.
template <typename Uses>
const Architecture* FirstUsing(const std::vector<Choice<Architecture>>& archs, Uses uses) {
  for (const Choice<Architecture>& arch : archs) {
    if (uses(arch.value)) return &arch.value;
  }
  return nullptr;
}

// The backbone `name` with the overrides of the grid's base.backbone resolves.
absl::Status CheckBackbone(const GridSpec& grid, const std::string& p, const std::string& name,
                           const std::string& path) {
  const std::vector<std::string> presets = BackbonePresetNames();
  if (!name.empty() && std::find(presets.begin(), presets.end(), name) == presets.end()) {
    return InvalidField(path, absl::StrCat("unknown backbone \"", name, "\""));
  }
  xmod::v1::BackboneSpec backbone = grid.base().backbone();
  backbone.set_name(name);
  absl::StatusOr<Backbone> resolved = ResolveBackbone(backbone);
  // "backbone.n_heads: ..." -> "grids[g].base.backbone.n_heads: ..."
  if (!resolved.ok()) return Reroot(resolved.status(), p + "base.");
  return absl::OkStatus();
}

// The axes, one function each, all through CollectAxis.
struct GridAxes {
  const SweepSpec& spec;
  const GridSpec& grid;
  const std::string p;  // "grids[g]."
  GridChoices* c;

  absl::Status Archs() const {
    return CollectAxis<Architecture>(
        grid.archs(), p + "archs",
        [](const Architecture& arch, const std::string& path) {
          if (arch == xmod::v1::ARCHITECTURE_UNSPECIFIED || !xmod::v1::Architecture_IsValid(arch)) {
            return InvalidField(path, "architecture must be set");
          }
          return absl::OkStatus();
        },
        [&]() -> absl::StatusOr<Choice<Architecture>> {
          if (grid.base().arch() == xmod::v1::ARCHITECTURE_UNSPECIFIED) {
            return InvalidField(p + "archs", "no architecture (give archs or base.arch)");
          }
          return Choice<Architecture>{grid.base().arch(), p + "base.arch"};
        },
        &c->archs);
  }

  absl::Status Backbones() const {
    return CollectAxis<std::string>(
        grid.backbones(), p + "backbones",
        [&](const std::string& name, const std::string& path) {
          if (name.empty()) return InvalidField(path, "backbone name is empty");
          return CheckBackbone(grid, p, name, path);
        },
        [&]() -> absl::StatusOr<Choice<std::string>> {
          const std::string& name = grid.base().backbone().name();
          const std::string path = p + "base.backbone.name";
          if (name.empty() && grid.base().backbone().d_model() == 0) {
            return InvalidField(p + "backbones",
                                absl::StrCat("needs at least one backbone (", path,
                                             " is empty and base.backbone gives no d_model)"));
          }
          if (absl::Status s = CheckBackbone(grid, p, name, path); !s.ok()) return s;
          return Choice<std::string>{name, path};
        },
        &c->backbones);
  }

  absl::Status SeqLens() const {
    const int seq_len = spec.training().seq_len();
    return CollectAxis<int>(
        grid.seq_lens(), p + "seq_lens",
        [](const int& l, const std::string& path) {
          return l < 1 ? InvalidField(path, absl::StrCat("L must be >= 1, got ", l))
                       : absl::OkStatus();
        },
        [&]() -> absl::StatusOr<Choice<int>> {
          if (seq_len < 1) {
            return InvalidField("training.seq_len", absl::StrCat("L must be >= 1 (or give ", p,
                                                                 "seq_lens), got ", seq_len));
          }
          return Choice<int>{seq_len, "training.seq_len"};
        },
        &c->ls);
  }

  absl::Status Ks() const {
    return CollectAxis<int>(
        grid.ks(), p + "ks",
        [](const int& k, const std::string& path) {
          return k < 1 ? InvalidField(path, absl::StrCat("K must be >= 1, got ", k))
                       : absl::OkStatus();
        },
        [&]() -> absl::StatusOr<Choice<int>> {
          const int k = grid.base().k();
          if (const Architecture* sparse = FirstUsing(c->archs, UsesK); sparse && k < 1) {
            return InvalidField(
                p + "ks", absl::StrCat(ArchitectureTitle(*sparse), " needs at least one K (", p,
                                       "base.k is ", k, ")"));
          }
          return Choice<int>{std::max(1, k), p + "base.k"};
        },
        &c->ks);
  }

  absl::Status As() const {
    return CollectAxis<double>(
        grid.as(), p + "as",
        [](const double& a, const std::string& path) {
          return FinitePositive(a) ? absl::OkStatus()
                                   : InvalidField(path, absl::StrCat("A must be > 0, got ", a));
        },
        [&]() -> absl::StatusOr<Choice<double>> {
          const double a = grid.base().a();
          if (const Architecture* anchored = FirstUsing(c->archs, UsesA);
              anchored && !FinitePositive(a)) {
            return InvalidField(
                p + "as", absl::StrCat(ArchitectureTitle(*anchored), " needs at least one A (", p,
                                       "base.a is ", a, ")"));
          }
          return Choice<double>{a, p + "base.a"};
        },
        &c->as);
  }

  absl::Status Budgets() const {
    const double budget = spec.training().flop_budget();
    return CollectAxis<double>(
        grid.flop_budgets(), p + "flop_budgets",
        [](const double& b, const std::string& path) {
          return FinitePositive(b)
                     ? absl::OkStatus()
                     : InvalidField(path, absl::StrCat("the FLOP budget must be > 0, got ", b));
        },
        [&]() -> absl::StatusOr<Choice<double>> {
          if (!FinitePositive(budget)) {
            return InvalidField("training.flop_budget",
                                absl::StrCat("the FLOP budget must be > 0 (or give ", p,
                                             "flop_budgets), got ", budget));
          }
          return Choice<double>{budget, "training.flop_budget"};
        },
        &c->budgets);
  }

  absl::Status Moes() const {
    return CollectAxis<std::string>(
        grid.moe_experts(), p + "moe_experts",
        [](const std::string& experts, const std::string& path) {
          xmod::v1::MoESpec moe;
          absl::Status parsed = ParseExperts(experts, &moe);
          return parsed.ok() ? parsed : InvalidField(path, parsed.message());
        },
        [&]() -> absl::StatusOr<Choice<std::string>> {
          const xmod::v1::MoESpec& moe = grid.base().moe();
          const auto is_moe = [](Architecture arch) { return arch == xmod::v1::MOE; };
          if (FirstUsing(c->archs, is_moe) && moe.total_experts() < 1) {
            return InvalidField(
                p + "moe_experts",
                absl::StrCat("MOE needs at least one expert config such as "
                             "\"6:64+2\" (",
                             p, "base.moe.total_experts is ", moe.total_experts(), ")"));
          }
          return Choice<std::string>{"", ""};
        },
        &c->moes);
  }

  absl::Status Seeds() const {
    std::set<uint64_t> distinct;
    c->replicated = grid.seeds_size() > 0;
    return CollectAxis<uint64_t>(
        grid.seeds(), p + "seeds",
        [&](const uint64_t& seed, const std::string& path) {
          return distinct.insert(seed).second
                     ? absl::OkStatus()
                     : InvalidField(path, absl::StrCat("seed ", seed, " is listed twice"));
        },
        [&]() {
          return Choice<uint64_t>{spec.training().seed(), "training.seed"};
        },
        &c->seeds);
  }
};

}  // namespace

bool UsesK(Architecture arch) { return arch != xmod::v1::DENSE && arch != xmod::v1::MOE; }
bool UsesA(Architecture arch) { return UsesK(arch) && arch != xmod::v1::MOD; }

std::string ArchitectureTitle(Architecture arch) {
  return arch == xmod::v1::XMOD ? "X-MoD" : xmod::v1::Architecture_Name(arch);
}

std::vector<size_t> GridChoices::AxisSizes() const {
  return {archs.size(), backbones.size(), ls.size(),   ks.size(),
          as.size(),    budgets.size(),   moes.size(), seeds.size()};
}

Combo GridChoices::At(const std::vector<size_t>& i) const {
  return Combo{archs[i[0]], backbones[i[1]], ls[i[2]],   ks[i[3]],
               as[i[4]],    budgets[i[5]],   moes[i[6]], seeds[i[7]]};
}

absl::StatusOr<GridChoices> GridValues(const SweepSpec& spec, int g) {
  const GridSpec& grid = spec.grids(g);
  const std::string p = absl::StrCat("grids[", g, "].");
  GridChoices c;
  const GridAxes axes{spec, grid, p, &c};
  // In Combo order, which is also the order in which a spec's errors are reported.
  for (absl::Status (GridAxes::*collect)() const :
       {&GridAxes::Archs, &GridAxes::Backbones, &GridAxes::SeqLens, &GridAxes::Ks, &GridAxes::As,
        &GridAxes::Budgets, &GridAxes::Moes, &GridAxes::Seeds}) {
    if (absl::Status s = (axes.*collect)(); !s.ok()) return s;
  }
  return c;
}

}  // namespace xmod
