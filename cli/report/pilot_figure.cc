// The Fig. 4-style pilot figure. See pilot_figure.h.
#include "cli/report/pilot_figure.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace xmod::report {
namespace {

using xmod::v1::PilotConfiguration;
using xmod::v1::SelectPilotResponse;

constexpr Color kBudgetGreen{0.13, 0.6, 0.25};

// Indices of the selected pairs: every baseline MoE and its pick.
std::set<int> SelectedPairs(const SelectPilotResponse& pilot) {
  std::set<int> out;
  for (const xmod::v1::PilotSelection& s : pilot.selections()) {
    if (!s.baseline()) continue;
    out.insert(s.moe_index());
    if (s.pick_index() >= 0) out.insert(s.pick_index());
  }
  return out;
}

// The measured configurations as series, one per (K, arch, selected): the legend names each
// (K, arch) once; and the range of their losses (`any`: there was a measured one).
struct MeasuredSeries {
  std::map<std::tuple<int, bool, bool>, Series> series;
  double lo = 0, hi = 0;
  bool any = false;
};

// The colour (by K's rank in `ks`), marker, ring and legend of the series of `c`.
void StyleSeries(const PilotConfiguration& c, bool moe, bool ringed, const std::set<int>& ks,
                 Series& s) {
  const int colour = static_cast<int>(std::distance(ks.begin(), ks.find(c.k())));
  s.color = PaletteColor(colour);
  s.marker = moe ? Marker::kDiamond : Marker::kCircle;
  if (ringed) s.edge = kBlack;
  s.label = absl::StrCat(ringed ? "selected " : "", moe ? "MoE" : "X-MoD", " K = ", c.k());
}

MeasuredSeries CollectMeasured(const SelectPilotResponse& pilot) {
  const std::set<int> selected = SelectedPairs(pilot);
  std::set<int> ks;
  for (const PilotConfiguration& c : pilot.configurations()) ks.insert(c.k());
  MeasuredSeries m;
  for (int i = 0; i < pilot.configurations_size(); ++i) {
    const PilotConfiguration& c = pilot.configurations(i);
    if (c.status() != xmod::v1::PILOT_MEASURED) continue;
    const bool moe = c.arch() == xmod::v1::MOE;
    const bool ringed = selected.count(i) > 0;
    Series& s = m.series[{c.k(), moe, ringed}];
    if (s.x.empty()) StyleSeries(c, moe, ringed, ks, s);
    s.x.push_back(c.total_params());
    s.y.push_back(c.val_loss());
    m.lo = m.any ? std::min(m.lo, c.val_loss()) : c.val_loss();
    m.hi = m.any ? std::max(m.hi, c.val_loss()) : c.val_loss();
    m.any = true;
  }
  return m;
}

// A dashed vertical line at each selected baseline MoE's size, over the losses [lo, hi] and
// a margin; the first is in the legend.
void AddBudgetLines(const SelectPilotResponse& pilot, double lo, double hi, Chart& chart) {
  const double margin = hi > lo ? 0.05 * (hi - lo) : 0.01;
  for (const xmod::v1::PilotSelection& s : pilot.selections()) {
    if (!s.baseline()) continue;
    Series budget;
    if (chart.series.empty()) budget.label = "selected MoE budget";
    budget.color = kBudgetGreen;
    budget.style = SeriesStyle::kDashedLine;
    const double n = pilot.configurations(s.moe_index()).total_params();
    budget.x = {n, n};
    budget.y = {lo - margin, hi + margin};
    chart.series.push_back(std::move(budget));
  }
}

}  // namespace

absl::StatusOr<Chart> PilotChart(const SelectPilotResponse& pilot) {
  Chart chart;
  chart.title = absl::StrCat("Pilot sweep ", pilot.sweep_id(), ": X-MoD and MoE (paper Fig. 4)");
  chart.x = {"total parameters N", Scale::kLog};
  chart.y = {"validation loss (mean over seeds)", Scale::kLinear};
  MeasuredSeries measured = CollectMeasured(pilot);
  if (!measured.any) {
    return absl::InvalidArgumentError(
        absl::StrCat("pilot sweep ", pilot.sweep_id(), ": no configuration has a measured loss"));
  }
  AddBudgetLines(pilot, measured.lo, measured.hi, chart);
  for (auto& [key, s] : measured.series) chart.series.push_back(std::move(s));
  return chart;
}

absl::StatusOr<std::vector<std::string>> WritePilotFigure(const SelectPilotResponse& pilot,
                                                          const std::string& dir) {
  absl::StatusOr<Chart> chart = PilotChart(pilot);
  if (!chart.ok()) return chart.status();
  if (absl::Status s = MakeDirs(dir); !s.ok()) return absl::UnavailableError(s.message());
  std::vector<std::string> written;
  for (const auto& [format, ext] :
       {std::pair{ImageFormat::kPng, ".png"}, std::pair{ImageFormat::kSvg, ".svg"}}) {
    const std::string path = absl::StrCat(dir, "/pilot_selection", ext);
    if (absl::Status s = WriteChart(*chart, format, path); !s.ok()) return s;
    written.push_back(path);
  }
  return written;
}

}  // namespace xmod::report
