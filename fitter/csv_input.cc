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
#include "fitter/law_backbones.h"

namespace xmod::fitter {
namespace {

std::string Trimmed(absl::string_view s) { return std::string(absl::StripAsciiWhitespace(s)); }

using ColumnIndex = std::map<std::string, int>;

// One data line of the CSV, split into trimmed cells.
struct CsvRow {
  int line_no = 0;
  const ColumnIndex& column;
  std::vector<std::string> cells;

  std::string Cell(const std::string& name) const {
    auto it = column.find(name);
    if (it == column.end() || it->second >= static_cast<int>(cells.size())) return "";
    return cells[it->second];
  }
  absl::Status Bad(const std::string& name, const std::string& why) const {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line_no, ", column ", name, ": ", why, " ('", Cell(name), "')"));
  }
};

absl::Status ParseHeader(const std::vector<std::string>& cells, int line_no, ColumnIndex* column) {
  for (int i = 0; i < static_cast<int>(cells.size()); ++i) (*column)[cells[i]] = i;
  for (const char* required : {"n_act", "L", "K", "A", "delta"}) {
    if (column->count(required) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": header lacks column '", required,
                       "' (expected n_act,L,K,A,delta[,group][,held_out][,sweep][,C])"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Observation> ParseDeltaColumns(const CsvRow& row) {
  double n_act = 0, a = 0, delta = 0;
  int seq_len = 0, k = 0;
  if (!absl::SimpleAtod(row.Cell("n_act"), &n_act)) return row.Bad("n_act", "not a number");
  if (!absl::SimpleAtoi(row.Cell("L"), &seq_len)) return row.Bad("L", "not an integer");
  if (!absl::SimpleAtoi(row.Cell("K"), &k)) return row.Bad("K", "not an integer");
  if (!absl::SimpleAtod(row.Cell("A"), &a)) return row.Bad("A", "not a number");
  // "nan" and "inf" parse; MakeDeltaObservation rejects them naming the observation.
  if (!absl::SimpleAtod(row.Cell("delta"), &delta)) return row.Bad("delta", "not a number");
  absl::StatusOr<std::string> backbone = NearestPreset(n_act);
  if (!backbone.ok()) return row.Bad("n_act", std::string(backbone.status().message()));
  return MakeDeltaObservation(absl::StrCat("line ", row.line_no), *backbone, seq_len, k, a, delta);
}

void AddGroups(const CsvRow& row, Observation* obs) {
  const std::string groups = row.Cell("group");
  if (!groups.empty()) {
    for (absl::string_view g : absl::StrSplit(groups, ';', absl::SkipWhitespace())) {
      obs->groups.push_back(Trimmed(g));
    }
  }
}

absl::Status AddSweeps(const CsvRow& row, Observation* obs) {
  const std::string sweep_cell = row.Cell("sweep");
  for (absl::string_view name : absl::StrSplit(sweep_cell, ';', absl::SkipWhitespace())) {
    const std::string trimmed = Trimmed(name);
    std::optional<SweepRole> role = SweepRoleOfLabel(trimmed);
    if (!role.has_value() || trimmed != SweepRoleName(*role)) {
      return row.Bad("sweep", absl::StrCat("unknown sweep '", trimmed, "' (kxl, nact or axk)"));
    }
    obs->sweeps.push_back(*role);
  }
  return absl::OkStatus();
}

absl::StatusOr<Observation> ParseRow(const CsvRow& row) {
  absl::StatusOr<Observation> obs = ParseDeltaColumns(row);
  if (!obs.ok()) return obs.status();
  AddGroups(row, &*obs);
  if (absl::Status sweeps = AddSweeps(row, &*obs); !sweeps.ok()) return sweeps;
  const std::string held_out = row.Cell("held_out");
  obs->held_out = held_out == "1" || held_out == "true";
  if (const std::string c = row.Cell("C"); !c.empty()) {
    if (!absl::SimpleAtod(c, &obs->flops) || !(obs->flops > 0)) return row.Bad("C", "not > 0");
  }
  return obs;
}

}  // namespace

absl::StatusOr<std::vector<Observation>> ParseDeltaCsv(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  ColumnIndex column;
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
      if (absl::Status header = ParseHeader(cells, line_no, &column); !header.ok()) {
        return header;
      }
      continue;
    }
    absl::StatusOr<Observation> obs = ParseRow(CsvRow{line_no, column, std::move(cells)});
    if (!obs.ok()) return obs.status();
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
