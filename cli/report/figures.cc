// Figure 2-style charts of a stored fit. See figures.h.
#include "cli/report/figures.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fitter/law_backbones.h"
#include "fitter/law.h"
#include "fitter/sweep_fit.h"

namespace xmod::report {
namespace {

using xmod::v1::Fit;
using xmod::v1::FitObservation;
using Rows = std::vector<const FitObservation*>;

bool InSweep(const FitObservation& o, const std::string& sweep) {
  return std::find(o.sweeps().begin(), o.sweeps().end(), sweep) != o.sweeps().end();
}

bool NamesSweeps(const Fit& fit) {
  return std::any_of(fit.observations().begin(), fit.observations().end(),
                     [](const FitObservation& o) { return o.sweeps_size() > 0; });
}

// "2k", "32k" for multiples of 1024, else the number.
std::string ContextName(int seq_len) {
  return seq_len % 1024 == 0 ? absl::StrCat(seq_len / 1024, "k") : absl::StrCat(seq_len);
}

// The law's Δ (Eq. 14) at K and A on the plan of `row` (its backbone, L and N0); NaN when
// that plan cannot be built.
double LawDelta(const fitter::LawParams& params, const FitObservation& row, int k, double a) {
  if (k == 1) return 0;
  absl::StatusOr<double> ratio =
      fitter::CapacityRatio(row.backbone(), k, a, row.seq_len(), row.n0());
  if (!ratio.ok()) return std::nan("");
  return fitter::PredictDelta(
      params, {row.n_act(), *ratio, static_cast<double>(row.seq_len()), static_cast<double>(k), a});
}

// Legend entries without points: what a line and a hollow marker mean.
Series LegendOnly(std::string label, SeriesStyle style, bool hollow = false) {
  Series s;
  s.label = std::move(label);
  s.color = kBlack;
  s.style = style;
  s.hollow = hollow;
  return s;
}

Series Markers(std::string label, Color color, Marker marker, bool hollow = false) {
  Series s;
  s.label = std::move(label);
  s.color = color;
  s.marker = marker;
  s.hollow = hollow;
  return s;
}

// One group of a law figure: its law curve, then its measured and held-out points (each
// only when it has any).
void AddGroup(Chart& chart, Series law, Series measured, Series held_out) {
  chart.series.push_back(std::move(law));
  for (Series* s : {&measured, &held_out}) {
    if (!s->x.empty()) chart.series.push_back(std::move(*s));
  }
}

// The legend entries a law figure shares: the curve style, and hollow markers when any
// point is out of range.
void AddLawLegend(Chart& chart, bool any_held_out) {
  chart.series.push_back(LegendOnly("law (Eq. 14)", SeriesStyle::kLine));
  if (any_held_out) {
    chart.series.push_back(LegendOnly("out of range", SeriesStyle::kMarkers, /*hollow=*/true));
  }
}

Figure DeltaVsK(const Fit& fit) {
  Figure fig{"delta_vs_k", std::nullopt, ""};
  const Rows rows = ContextSweepRows(fit);
  if (rows.empty()) {
    fig.skipped = "no run of a context sweep (kxl rows, or A = 1 runs)";
    return fig;
  }
  // One series per (backbone, L): a study's kxl rows may come from several backbones.
  std::map<std::pair<std::string, int>, Rows> by_l;
  std::set<std::string> backbones;
  for (const FitObservation* o : rows) {
    by_l[{o->backbone(), o->seq_len()}].push_back(o);
    backbones.insert(o->backbone());
  }
  const bool one_backbone = backbones.size() == 1;
  const fitter::LawParams params = fitter::LawParamsFromProto(fit.params());
  Chart chart;
  chart.title = absl::StrCat("Δ against K per context length (",
                             one_backbone ? rows.front()->backbone() + ", " : "", "A = 1)");
  chart.x = {"token sparsity K", Scale::kLog};
  chart.y = {"Δ = loss − dense loss at equal FLOPs (nats)"};
  bool any_held_out = false;
  int color = 0;
  for (const auto& [key, group] : by_l) {
    const Color c = PaletteColor(color++);
    const bool all_held_out = std::all_of(group.begin(), group.end(),
                                          [](const FitObservation* o) { return o->held_out(); });
    Series measured = Markers("", c, Marker::kCircle);
    Series held_out = Markers("", c, Marker::kCircle, /*hollow=*/true);
    int k_max = 1;
    for (const FitObservation* o : group) {
      Series& s = o->held_out() ? held_out : measured;
      s.x.push_back(o->k());
      s.y.push_back(o->delta());
      k_max = std::max(k_max, o->k());
      any_held_out |= o->held_out();
    }
    (all_held_out ? held_out : measured).label =
        absl::StrCat(one_backbone ? "" : key.first + " ", "L=", ContextName(key.second),
                     all_held_out ? " (held out)" : "");
    Series law;
    law.color = c;
    law.style = SeriesStyle::kLine;
    for (int k = 1; k <= k_max; ++k) {
      law.x.push_back(k);
      law.y.push_back(LawDelta(params, *group.front(), k, 1));
    }
    AddGroup(chart, std::move(law), std::move(measured), std::move(held_out));
  }
  AddLawLegend(chart, any_held_out);
  fig.chart = std::move(chart);
  return fig;
}

Figure DeltaVsA(const Fit& fit) {
  Figure fig{"delta_vs_a", std::nullopt, ""};
  const Rows rows = AnchorSweepRows(fit);
  if (std::none_of(rows.begin(), rows.end(), [](const FitObservation* o) { return o->a() != 1; })) {
    fig.skipped = "no run with A ≠ 1 (no anchor-stride sweep)";
    return fig;
  }
  std::map<int, Rows> by_k;
  double a_min = INFINITY, a_max = -INFINITY;
  for (const FitObservation* o : rows) {
    by_k[o->k()].push_back(o);
    a_min = std::min(a_min, o->a());
    a_max = std::max(a_max, o->a());
  }
  const fitter::LawParams params = fitter::LawParamsFromProto(fit.params());
  // Stage 2 of a fit by sweep models the axk sweep with its own offset e_stage2.
  const bool own_offset =
      fit.by_sweep() && std::any_of(rows.begin(), rows.end(), [](const FitObservation* o) {
        return !o->held_out() && InSweep(*o, "axk");
      });
  const double shift = own_offset ? fit.e_stage2() - fit.params().e() : 0;
  const FitObservation& first = *rows.front();
  Chart chart;
  chart.title = absl::StrCat("Δ against A per K (", first.backbone(),
                             ", L=", ContextName(first.seq_len()), ")");
  chart.x = {"anchor stride A", Scale::kLinear};
  chart.y = {"Δ = loss − dense loss at equal FLOPs (nats)"};
  bool any_held_out = false;
  int color = 0;
  for (const auto& [k, group] : by_k) {
    const Color c = PaletteColor(color++);
    Series measured = Markers("", c, Marker::kSquare);
    Series held_out = Markers("", c, Marker::kSquare, /*hollow=*/true);
    for (const FitObservation* o : group) {
      Series& s = o->held_out() ? held_out : measured;
      s.x.push_back(o->a());
      s.y.push_back(o->delta());
      any_held_out |= o->held_out();
    }
    (measured.x.empty() ? held_out : measured).label = absl::StrCat("K=", k);
    // Every A with A·K whole in [a_min, a_max]: the plans the accounting can build.
    Series law;
    law.color = c;
    law.style = SeriesStyle::kLine;
    for (int j = static_cast<int>(std::ceil(a_min * k - 1e-9));
         j <= static_cast<int>(std::floor(a_max * k + 1e-9)); ++j) {
      const double a = static_cast<double>(j) / k;
      law.x.push_back(a);
      law.y.push_back(LawDelta(params, *group.front(), k, a) + shift);
    }
    AddGroup(chart, std::move(law), std::move(measured), std::move(held_out));
  }
  AddLawLegend(chart, any_held_out);
  fig.chart = std::move(chart);
  return fig;
}

// The kind of a cross-validation fold from its group name (validation.h).
std::string FoldKind(const std::string& group) {
  if (absl::StartsWith(group, "L=")) return "CV: leave one L out";
  if (absl::StartsWith(group, "N_act=")) return "CV: leave one N_act out";
  if (absl::StartsWith(group, "A=")) return "CV: leave one A out";
  return "CV: held-out group";
}

Figure PredictedVsMeasured(const Fit& fit) {
  Figure fig{"predicted_vs_measured", std::nullopt, ""};
  Series fitted = Markers("in range, fitted", kGrey, Marker::kCircle);
  Series out_of_range = Markers("out of range, predicted", PaletteColor(3), Marker::kDiamond);
  std::map<std::string, Series> cv;  // by fold kind
  for (const FitObservation& o : fit.observations()) {
    Series& s = o.held_out() ? out_of_range : fitted;
    s.x.push_back(o.delta());
    s.y.push_back(o.fitted_delta());
    for (const FitObservation::CvPrediction& p : o.cv()) {
      const std::string kind = FoldKind(p.group());
      auto it = cv.find(kind);
      if (it == cv.end()) {
        const int n = static_cast<int>(cv.size());
        const Marker markers[] = {Marker::kTriangle, Marker::kSquare, Marker::kCircle};
        it = cv.emplace(kind, Markers(kind, PaletteColor(n == 3 ? 4 : n), markers[n % 3],
                                      /*hollow=*/true))
                 .first;
      }
      it->second.x.push_back(o.delta());
      it->second.y.push_back(p.delta());
    }
  }
  if (out_of_range.x.empty() && cv.empty()) {
    fig.skipped = "no out-of-range run and no cross-validation prediction";
    return fig;
  }
  Chart chart;
  chart.title = "Predicted against measured Δ";
  chart.x = {"measured Δ (nats)", Scale::kLinear};
  chart.y = {"predicted Δ (nats)", Scale::kLinear};
  chart.series.push_back(std::move(fitted));
  for (auto& [kind, s] : cv) chart.series.push_back(std::move(s));
  if (!out_of_range.x.empty()) chart.series.push_back(std::move(out_of_range));
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : chart.series) {
    for (const std::vector<double>* v : {&s.x, &s.y}) {
      for (double d : *v) {
        if (!std::isfinite(d)) continue;
        lo = std::min(lo, d);
        hi = std::max(hi, d);
      }
    }
  }
  const double pad = 0.05 * std::max(hi - lo, 1e-6);
  chart.x.lo = chart.y.lo = lo - pad;
  chart.x.hi = chart.y.hi = hi + pad;
  Series diagonal;
  diagonal.label = "y = x";
  diagonal.color = kBlack;
  diagonal.style = SeriesStyle::kDashedLine;
  diagonal.x = diagonal.y = {lo - pad, hi + pad};
  chart.series.insert(chart.series.begin(), std::move(diagonal));
  fig.chart = std::move(chart);
  return fig;
}

}  // namespace

Rows ContextSweepRows(const Fit& fit) {
  Rows out;
  if (NamesSweeps(fit)) {
    for (const FitObservation& o : fit.observations()) {
      if (InSweep(o, "kxl")) out.push_back(&o);
    }
    return out;
  }
  // The backbone with the most context lengths among the A = 1 runs (then the most runs).
  std::map<std::string, std::set<int>> ls;
  std::map<std::string, int> runs;
  for (const FitObservation& o : fit.observations()) {
    if (o.a() != 1) continue;
    ls[o.backbone()].insert(o.seq_len());
    ++runs[o.backbone()];
  }
  std::string best;
  for (const auto& [backbone, l] : ls) {
    if (best.empty() ||
        std::make_tuple(l.size(), runs[backbone]) > std::make_tuple(ls[best].size(), runs[best])) {
      best = backbone;
    }
  }
  for (const FitObservation& o : fit.observations()) {
    if (o.a() == 1 && o.backbone() == best) out.push_back(&o);
  }
  return out;
}

Rows AnchorSweepRows(const Fit& fit) {
  Rows out;
  if (NamesSweeps(fit)) {
    for (const FitObservation& o : fit.observations()) {
      if (InSweep(o, "axk")) out.push_back(&o);
    }
    return out;
  }
  // The (backbone, L) with the most A ≠ 1 runs, at the K values of those runs.
  std::map<std::pair<std::string, int>, int> anchored;
  for (const FitObservation& o : fit.observations()) {
    if (o.a() != 1) ++anchored[{o.backbone(), o.seq_len()}];
  }
  if (anchored.empty()) return out;
  const auto best = std::max_element(anchored.begin(), anchored.end(), [](auto& x, auto& y) {
                      return x.second < y.second;
                    })->first;
  std::set<int> ks;
  for (const FitObservation& o : fit.observations()) {
    if (o.a() != 1 && o.backbone() == best.first && o.seq_len() == best.second) ks.insert(o.k());
  }
  for (const FitObservation& o : fit.observations()) {
    if (o.backbone() == best.first && o.seq_len() == best.second && ks.count(o.k())) {
      out.push_back(&o);
    }
  }
  return out;
}

std::vector<Figure> BuildFigures(const Fit& fit) {
  return {DeltaVsK(fit), DeltaVsA(fit), PredictedVsMeasured(fit)};
}

}  // namespace xmod::report
