// CSV of Δ observations. See csv_input.h.
#include "fitter/csv_input.h"

#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fitter/backbones.h"

namespace xmod::fitter {
namespace {

std::string Trimmed(absl::string_view s) { return std::string(absl::StripAsciiWhitespace(s)); }

}  // namespace

absl::StatusOr<std::vector<Observation>> ParseDeltaCsv(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  std::map<std::string, int> column;
  std::vector<Observation> out;
  int line_no = 0;
  bool header_seen = false;
  for (const std::string& raw : lines) {
    ++line_no;
    const std::string line = Trimmed(raw);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    for (std::string& c : cells) c = Trimmed(c);
    if (!header_seen) {
      header_seen = true;
      for (int i = 0; i < static_cast<int>(cells.size()); ++i) column[cells[i]] = i;
      for (const char* required : {"n_act", "L", "K", "A", "delta"}) {
        if (column.count(required) == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("line ", line_no, ": header lacks column '", required,
                           "' (expected n_act,L,K,A,delta[,group][,held_out][,sweep][,C])"));
        }
      }
      continue;
    }
    auto cell = [&](const std::string& name) -> std::string {
      auto it = column.find(name);
      if (it == column.end() || it->second >= static_cast<int>(cells.size())) return "";
      return cells[it->second];
    };
    auto bad = [&](const std::string& name, const std::string& why) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ", column ", name, ": ", why, " ('", cell(name), "')"));
    };
    double n_act = 0, a = 0, delta = 0;
    int seq_len = 0, k = 0;
    if (!absl::SimpleAtod(cell("n_act"), &n_act)) return bad("n_act", "not a number");
    if (!absl::SimpleAtoi(cell("L"), &seq_len)) return bad("L", "not an integer");
    if (!absl::SimpleAtoi(cell("K"), &k)) return bad("K", "not an integer");
    if (!absl::SimpleAtod(cell("A"), &a)) return bad("A", "not a number");
    // "nan" and "inf" parse; MakeDeltaObservation rejects them naming the observation.
    if (!absl::SimpleAtod(cell("delta"), &delta)) return bad("delta", "not a number");
    absl::StatusOr<std::string> backbone = NearestPreset(n_act);
    if (!backbone.ok()) return bad("n_act", std::string(backbone.status().message()));
    absl::StatusOr<Observation> obs =
        MakeDeltaObservation(absl::StrCat("line ", line_no), *backbone, seq_len, k, a, delta);
    if (!obs.ok()) return obs.status();
    const std::string groups = cell("group");
    if (!groups.empty()) {
      for (absl::string_view g : absl::StrSplit(groups, ';', absl::SkipWhitespace())) {
        obs->groups.push_back(Trimmed(g));
      }
    }
    const std::string sweep_cell = cell("sweep");
    for (absl::string_view name : absl::StrSplit(sweep_cell, ';', absl::SkipWhitespace())) {
      const std::string trimmed = Trimmed(name);
      std::optional<SweepRole> role = SweepRoleOfLabel(trimmed);
      if (!role.has_value() || trimmed != SweepRoleName(*role)) {
        return bad("sweep", absl::StrCat("unknown sweep '", trimmed, "' (kxl, nact or axk)"));
      }
      obs->sweeps.push_back(*role);
    }
    const std::string held_out = cell("held_out");
    obs->held_out = held_out == "1" || held_out == "true";
    if (const std::string c = cell("C"); !c.empty()) {
      if (!absl::SimpleAtod(c, &obs->flops) || !(obs->flops > 0)) return bad("C", "not > 0");
    }
    out.push_back(*std::move(obs));
  }
  if (out.empty()) return absl::InvalidArgumentError("csv: no observations");
  return out;
}

std::string WriteDeltaCsv(const std::vector<Observation>& observations) {
  std::string out = "n_act,L,K,A,delta,group,held_out,sweep,C\n";
  for (const Observation& o : observations) {
    std::vector<std::string> sweeps;
    for (SweepRole role : o.sweeps) sweeps.push_back(SweepRoleName(role));
    absl::StrAppend(&out, o.n_act, ",", o.seq_len, ",", o.k, ",", o.a, ",",
                    absl::StrFormat("%.17g", o.delta), ",", absl::StrJoin(o.groups, ";"), ",",
                    o.held_out ? 1 : 0, ",", absl::StrJoin(sweeps, ";"), ",",
                    o.flops > 0 ? absl::StrFormat("%.17g", o.flops) : "", "\n");
  }
  return out;
}

}  // namespace xmod::fitter
