// Output formatting for xmodctl (see format.h).
#include "cli/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace xmod::cli {
namespace {

// Display width of UTF-8 text: one column per code point (continuation bytes skipped), so
// headers such as "φ/φ_D" line up.
size_t DisplayWidth(absl::string_view s) {
  size_t width = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++width;
  }
  return width;
}

std::string Pad(absl::string_view s, size_t width, bool right_align) {
  size_t w = DisplayWidth(s);
  std::string fill(width > w ? width - w : 0, ' ');
  return right_align ? absl::StrCat(fill, s) : absl::StrCat(s, fill);
}

std::string CsvField(absl::string_view s) {
  if (s.find_first_of(",\"\n\r") == absl::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

// Mantissa with `sig` significant digits and a scale letter.
std::string Scaled(double v, const char* const letters[4]) {
  static constexpr double kScales[4] = {1e3, 1e6, 1e9, 1e12};
  double a = std::fabs(v);
  int idx = -1;
  for (int i = 3; i >= 0; --i) {
    // Round first so that 999.96e6 shows as "1.00B", not "1000M".
    if (a >= kScales[i] * 0.9995) {
      idx = i;
      break;
    }
  }
  if (idx < 0) {
    // Below a thousand: whole numbers as they are, others to 3 significant digits.
    return v == std::floor(v) ? absl::StrFormat("%.0f", v) : absl::StrFormat("%.3g", v);
  }
  double m = v / kScales[idx];
  double am = std::fabs(m);
  int decimals = am >= 99.95 ? 0 : (am >= 9.995 ? 1 : 2);
  return absl::StrCat(absl::StrFormat("%.*f", decimals, m), letters[idx]);
}

// The columns of a text table: display widths, and right alignment where every cell present
// is numeric (none when there are no rows).
struct ColumnLayout {
  std::vector<size_t> width;
  std::vector<bool> numeric;
};

ColumnLayout LayOutColumns(const Table& table) {
  const size_t n = table.columns.size();
  ColumnLayout layout{std::vector<size_t>(n, 0), std::vector<bool>(n, true)};
  for (size_t c = 0; c < n; ++c) layout.width[c] = DisplayWidth(table.columns[c]);
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < n && c < row.size(); ++c) {
      layout.width[c] = std::max(layout.width[c], DisplayWidth(row[c].text));
      if (!row[c].numeric && !row[c].missing) layout.numeric[c] = false;
    }
  }
  if (table.rows.empty()) layout.numeric.assign(n, false);
  return layout;
}

// One line of a text table, `cell_text(c)` in column c; a left-aligned last column is not
// padded.
template <typename CellText>
std::string TextLine(const ColumnLayout& layout, CellText cell_text) {
  const size_t n = layout.width.size();
  std::string out;
  for (size_t c = 0; c < n; ++c) {
    const bool right = layout.numeric[c];
    std::string cell = Pad(cell_text(c), c + 1 == n && !right ? 0 : layout.width[c], right);
    absl::StrAppend(&out, c ? "  " : "", cell);
  }
  return absl::StrCat(out, "\n");
}

}  // namespace

absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view text) {
  std::string t = absl::AsciiStrToLower(text);
  if (t == "table") return OutputFormat::kTable;
  if (t == "json") return OutputFormat::kJson;
  if (t == "csv") return OutputFormat::kCsv;
  return absl::InvalidArgumentError(
      absl::StrCat("--output: unknown format \"", text, "\" (table, json or csv)"));
}

Cell Cell::Str(absl::string_view s) { return Cell{std::string(s), false, false}; }
Cell Cell::Null() { return Cell{"-", false, true}; }
Cell Cell::Int(int64_t v) { return Cell{absl::StrCat(v), true, false}; }
Cell Cell::Shown(absl::string_view shown) { return Cell{std::string(shown), true, false}; }
Cell Cell::Num(double v) { return Shown(FormatNumber(v)); }
Cell Cell::Bool(bool v) { return Cell{v ? "yes" : "no", false, false}; }

std::string RenderText(const Table& table) {
  const ColumnLayout layout = LayOutColumns(table);
  std::string out;
  if (!table.title.empty()) absl::StrAppend(&out, table.title, "\n");
  absl::StrAppend(
      &out, TextLine(layout, [&](size_t c) { return absl::AsciiStrToUpper(table.columns[c]); }));
  for (const auto& row : table.rows) {
    absl::StrAppend(&out,
                    TextLine(layout, [&](size_t c) { return c < row.size() ? row[c].text : ""; }));
  }
  if (table.rows.empty()) absl::StrAppend(&out, "(no rows)\n");
  return out;
}

std::string RenderCsv(const Table& table) {
  std::string out;
  std::vector<std::string> fields;
  for (const auto& c : table.columns) fields.push_back(CsvField(c));
  absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
  for (const auto& row : table.rows) {
    fields.clear();
    for (size_t c = 0; c < table.columns.size(); ++c) {
      // Missing values are empty in CSV, not "-".
      fields.push_back(c < row.size() && !row[c].missing ? CsvField(row[c].text) : "");
    }
    absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
  }
  return out;
}

std::string Render(const Table& table, OutputFormat format) {
  return format == OutputFormat::kCsv ? RenderCsv(table) : RenderText(table);
}

std::string RenderSections(const std::vector<Table>& sections, OutputFormat format) {
  std::string out;
  for (size_t i = 0; i < sections.size(); ++i) {
    absl::StrAppend(
        &out, i ? "\n" : "",
        format == OutputFormat::kCsv ? RenderCsv(sections[i]) : RenderText(sections[i]));
  }
  return out;
}

std::string FormatLoss(double loss, bool zero_is_missing) {
  if (std::isnan(loss) || (zero_is_missing && loss == 0)) return "-";
  return absl::StrFormat("%.4f", loss);
}

std::string FormatFlops(double flops) {
  if (flops == 0) return "0";
  if (!std::isfinite(flops)) return absl::StrCat(flops);
  std::string s = absl::StrFormat("%.2e", flops);  // "3.93e+09"
  size_t e = s.find('e');
  std::string mantissa = s.substr(0, e);
  std::string exponent = s.substr(e + 1);
  bool negative = exponent[0] == '-';
  exponent = exponent.substr(1);
  exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
  return absl::StrCat(mantissa, "e", negative ? "-" : "", exponent);
}

std::string FormatParams(double params) {
  static const char* const kLetters[4] = {"K", "M", "B", "T"};
  return Scaled(params, kLetters);
}

std::string FormatBytes(int64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string FormatRate(double per_second) {
  static const char* const kLetters[4] = {"k", "M", "G", "T"};
  return Scaled(per_second, kLetters);
}

std::string FormatNumber(double v) {
  if (!std::isfinite(v)) return absl::StrCat(v);
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  if (std::fabs(v) >= 1e6 || std::fabs(v) < 1e-3) return FormatFlops(v);
  std::string s = absl::StrFormat("%.4f", v);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  if (seconds < 60) return absl::StrFormat("%.1fs", seconds);
  int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

std::string FormatUnixMs(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string FormatPercent(double fraction) {
  if (!std::isfinite(fraction)) return "-";
  return absl::StrFormat("%.0f%%", std::clamp(fraction, 0.0, 1.0) * 100.0);
}

absl::StatusOr<double> ParseCount(absl::string_view text) {
  std::string t(absl::StripAsciiWhitespace(text));
  double scale = 1;
  if (!t.empty()) {
    switch (absl::ascii_toupper(t.back())) {
      case 'K':
        scale = 1e3;
        break;
      case 'M':
        scale = 1e6;
        break;
      case 'B':
      case 'G':
        scale = 1e9;
        break;
      case 'T':
        scale = 1e12;
        break;
    }
    if (scale != 1) t.pop_back();
  }
  double v = 0;
  if (t.empty() || !absl::SimpleAtod(t, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a count: \"", text, "\" (examples: 2.64B, 556M, 1e9)"));
  }
  return v * scale;
}

}  // namespace xmod::cli
