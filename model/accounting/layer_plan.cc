// The layer plan (paper §2.2 Eq. 2, Appendix A.1, B.1, B.6): which kind of layer sits at
// each depth, the sparse interval of each routed layer, and the compact notation
// "[D]x4 + ([S8]x24+[D]) + ([S8]x32+[D])x4". Pure functions; thread-safe.
//
// Counting is exact in units of 1/K of a layer: a sparse layer is 1 unit, a dense layer K
// units, a group [S(K)] x (A*K) + [D] is A*K + K units, and the budget is (n_layers - N0)*K.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/field_path.h"
#include "model/accounting/accounting.h"

namespace xmod {
namespace {

using xmod::v1::Architecture;

constexpr int kMaxSparseLayersPerGroup = 4096;

// One group between dense anchors. For Routed-FFN, `sparse` counts routed FFN refinements
// (always a multiple of K: A units of [Attention] + [RoutedFfn] x K).
struct Group {
  int sparse = 0;
  bool anchor = true;
};

std::string Repeat(const std::string& element, int count) {
  return count == 1 ? element : absl::StrCat(element, "x", count);
}

// Notation of one group's routed part, e.g. "[S8]x24" or "([A]+[F8]x8)x3".
std::string RoutedText(Architecture arch, int k, int sparse) {
  switch (arch) {
    case xmod::v1::ROUTED_FFN: {
      const std::string unit = absl::StrCat("[A]+", Repeat(absl::StrCat("[F", k, "]"), k));
      const int units = sparse / k;
      return units == 1 ? unit : absl::StrCat("(", unit, ")x", units);
    }
    case xmod::v1::SELECTED_Q_FULL_KV:
      return Repeat(absl::StrCat("[SQ", k, "]"), sparse);
    default:
      return Repeat(absl::StrCat("[S", k, "]"), sparse);
  }
}

// Notation of one group, parenthesised when it has more than one part.
std::string GroupText(Architecture arch, int k, const Group& g) {
  if (g.sparse == 0) return "[D]";
  const std::string routed = RoutedText(arch, k, g.sparse);
  if (!g.anchor) return routed;
  return absl::StrCat("(", routed, "+[D])");
}

// Run-length joins equal neighbouring parts: "(x)" repeated n times becomes "(x)xn".
std::string JoinRuns(const std::vector<std::string>& parts) {
  std::vector<std::string> out;
  for (size_t i = 0; i < parts.size();) {
    size_t j = i;
    while (j < parts.size() && parts[j] == parts[i]) ++j;
    const int n = static_cast<int>(j - i);
    if (n == 1) {
      out.push_back(parts[i]);
    } else if ((parts[i].front() == '(' && parts[i].back() == ')') || parts[i] == "[D]") {
      out.push_back(absl::StrCat(parts[i], "x", n));
    } else {
      out.push_back(absl::StrCat("(", parts[i], ")x", n));
    }
    i = j;
  }
  return absl::StrJoin(out, " + ");
}

LayerPlan DensePlan(const Backbone& backbone, bool moe) {
  LayerPlan plan;
  plan.layers.assign(backbone.n_layers, LayerKind::kDense);
  plan.interval_of_layer.assign(backbone.n_layers, -1);
  plan.notation = Repeat(moe ? "[MoE]" : "[D]", backbone.n_layers);
  plan.n0 = 0;
  return plan;
}

// Fills n_layers - n0 active-equivalent layers with groups of a_k sparse layers + anchor
// (paper Eq. 2); the first group is shortened when they do not divide. When the remainder
// is smaller than one dense layer (possible only for A*K < K, e.g. MoD with K = 4 on 28
// layers: remainder 3/4), the first group is the remainder's sparse layers without an
// anchor, so the plan still counts exactly n_layers active-equivalent layers.
std::vector<Group> FillGroups(int n_layers, int n0, int k, int a_k) {
  const long budget = static_cast<long>(n_layers - n0) * k;  // units of 1/K layer
  const long group_units = a_k + k;
  std::vector<Group> groups;
  const long remainder = budget % group_units;
  if (remainder >= k) {
    groups.push_back(Group{static_cast<int>(remainder - k), true});
  } else if (remainder > 0) {
    groups.push_back(Group{static_cast<int>(remainder), false});
  }
  for (long i = 0; i < budget / group_units; ++i) groups.push_back(Group{a_k, true});
  return groups;
}

absl::Status ValidateArch(Architecture arch) {
  switch (arch) {
    case xmod::v1::DENSE:
    case xmod::v1::MOE:
    case xmod::v1::MOD:
    case xmod::v1::XMOD:
    case xmod::v1::ROUTED_FFN:
    case xmod::v1::SELECTED_Q_FULL_KV:
      return absl::OkStatus();
    default:
      return InvalidField("arch", absl::StrCat("unsupported architecture ", static_cast<int>(arch),
                                               " (DENSE, MOD, XMOD, MOE, ROUTED_FFN, "
                                               "SELECTED_Q_FULL_KV)"));
  }
}

absl::Status ValidateK(int k) {
  if (k < 1) return InvalidField("k", absl::StrCat("K must be >= 1, got ", k));
  // A group's first sparse layers can number up to K - 1 whatever A is (MoD ignores A): the
  // same bound as A*K keeps a hostile K from a plan of billions of layers (found by
  // fuzz/spec_text_fuzzer: MoD with K = 409999999).
  if (k > kMaxSparseLayersPerGroup) {
    return InvalidField("k", absl::StrCat("K = ", k, " is more than ", kMaxSparseLayersPerGroup));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ResolveN0(const xmod::v1::ModelSpec& model, const Backbone& backbone) {
  const int default_n0 = model.arch() == xmod::v1::MOD ? 1 : 4;
  const int n0 = model.has_n0() ? model.n0() : default_n0;
  if (n0 < 0 || n0 > backbone.n_layers) {
    return InvalidField("n0", absl::StrCat("dense prefix N0 must be in [0, n_layers = ",
                                           backbone.n_layers, "], got ", n0));
  }
  return n0;
}

// A*K, the sparse layers of a full group.
absl::StatusOr<int> ResolveSparsePerGroup(const xmod::v1::ModelSpec& model) {
  // MoD is the one-sparse-one-dense pattern: A*K = 1, whatever `a` says (paper §2.1, B.1).
  if (model.arch() == xmod::v1::MOD) return 1;
  const int k = model.k();
  const double a = model.a();
  if (!(a > 0) || !std::isfinite(a)) {
    return InvalidField("a", absl::StrCat("anchor stride A must be > 0, got ", a));
  }
  const double layers = a * k;
  // The paper's deepest groups have 48 sparse layers (A3K16); the bound keeps a hostile
  // spec from building a plan of billions of layers (found by fuzz/spec_text_fuzzer).
  if (layers > kMaxSparseLayersPerGroup) {
    return InvalidField(
        "a", absl::StrCat("A*K = ", a, "*", k, " = ", layers,
                          " sparse layers per group is more than ", kMaxSparseLayersPerGroup));
  }
  const int a_k = static_cast<int>(std::lround(layers));
  if (std::abs(layers - a_k) > 1e-9 || a_k < 1) {
    return InvalidField("a", absl::StrCat("A*K = ", a, "*", k, " = ", layers,
                                          " is not a whole number of sparse layers"));
  }
  if (model.arch() == xmod::v1::ROUTED_FFN && a_k % k != 0) {
    return InvalidField("a", absl::StrCat("Routed-FFN repeats [Attention]+[RoutedFfn]xK A times: "
                                          "A must be a whole number, got ",
                                          a));
  }
  return a_k;
}

// No-anchors ablation (Table 3, B.6), at matched size: each anchor leaves its group and
// joins the dense prefix, so the sparse layers run back to back while the model keeps
// its layer counts — the same N_act (active-equivalent layers), N, total depth and
// FLOPs per token (phi/phi_D) as full X-MoD; only the periodic full-token
// synchronisation between sparse stacks is gone (what §4.4 says the anchors provide).
// Sparse intervals still reset where the anchors were, so the token-choice bias (a
// separate ablation) keeps its per-interval meaning. Returns the grown dense prefix.
int RemoveAnchors(int n0, std::vector<Group>& groups) {
  int prefix = n0;
  for (Group& g : groups) {
    if (g.anchor) ++prefix;
    g.anchor = false;
  }
  groups.erase(
      std::remove_if(groups.begin(), groups.end(), [](const Group& g) { return g.sparse == 0; }),
      groups.end());
  return prefix;
}

LayerKind SparseKind(Architecture arch) {
  switch (arch) {
    case xmod::v1::ROUTED_FFN:
      return LayerKind::kRoutedFfn;
    case xmod::v1::SELECTED_Q_FULL_KV:
      return LayerKind::kSparseFullKv;
    default:
      return LayerKind::kSparse;
  }
}

// What the layers of a routed plan are laid out from.
struct Layout {
  Architecture arch;
  int k;
  bool no_anchors;
};

// Appends one group's layers: its sparse layers in sparse interval `interval` (each K of
// Routed-FFN's after an attention module), then its anchor.
void AppendGroupLayers(const Layout& layout, const Group& g, int interval, LayerPlan& plan) {
  for (int i = 0; i < g.sparse; ++i) {
    if (layout.arch == xmod::v1::ROUTED_FFN && i % layout.k == 0) {
      plan.layers.push_back(LayerKind::kAttention);
      plan.interval_of_layer.push_back(-1);
    }
    plan.layers.push_back(SparseKind(layout.arch));
    plan.interval_of_layer.push_back(interval);
  }
  if (g.anchor) {
    plan.layers.push_back(LayerKind::kDense);
    plan.interval_of_layer.push_back(-1);
  }
}

// The plan of `prefix` dense layers followed by `groups`, with its notation.
LayerPlan LayOut(const Layout& layout, int prefix, const std::vector<Group>& groups) {
  LayerPlan plan;
  plan.n0 = prefix;
  std::vector<std::string> parts;
  if (prefix > 0) parts.push_back(Repeat("[D]", prefix));
  int interval = -1;
  bool open_interval = false;  // an anchorless group continues into the next one
  for (const Group& g : groups) {
    if (g.sparse > 0 && !open_interval) ++interval;
    AppendGroupLayers(layout, g, interval, plan);
    open_interval = !g.anchor && !layout.no_anchors;
    parts.push_back(GroupText(layout.arch, layout.k, g));
  }
  // Dense layers of the prefix and the following anchor-only first group read as one run.
  if (prefix > 0 && parts.size() > 1 && parts[1] == "[D]") {
    parts[0] = Repeat("[D]", prefix + 1);
    parts.erase(parts.begin() + 1);
  }
  plan.layers.insert(plan.layers.begin(), prefix, LayerKind::kDense);
  plan.interval_of_layer.insert(plan.interval_of_layer.begin(), prefix, -1);
  plan.notation = JoinRuns(parts);
  return plan;
}

}  // namespace

absl::StatusOr<LayerPlan> BuildLayerPlan(const xmod::v1::ModelSpec& model,
                                         const Backbone& backbone) {
  const Architecture arch = model.arch();
  if (absl::Status s = ValidateArch(arch); !s.ok()) return s;
  if (arch == xmod::v1::DENSE || arch == xmod::v1::MOE) {
    return DensePlan(backbone, /*moe=*/arch == xmod::v1::MOE);
  }
  const int k = model.k();
  if (absl::Status s = ValidateK(k); !s.ok()) return s;
  if (k == 1) return DensePlan(backbone, /*moe=*/false);  // every token in every layer

  absl::StatusOr<int> n0 = ResolveN0(model, backbone);
  if (!n0.ok()) return n0.status();
  absl::StatusOr<int> a_k = ResolveSparsePerGroup(model);
  if (!a_k.ok()) return a_k.status();
  std::vector<Group> groups = FillGroups(backbone.n_layers, *n0, k, *a_k);
  const int prefix = model.no_anchors() ? RemoveAnchors(*n0, groups) : *n0;
  return LayOut(Layout{arch, k, model.no_anchors()}, prefix, groups);
}

}  // namespace xmod
