// Output formatting for xmodctl: a Table of typed cells rendered as an aligned text table or
// CSV (RFC 4180), and the number formats every command shares (losses with 4 decimals, FLOPs
// in e-notation, parameter counts as "2.64B"). JSON is not a table: -o json prints the
// response message itself (render.h PrintJson, common/proto_json.h).
// Pure functions and value types; thread-compatible.
#ifndef XMOD_CLI_FORMAT_H_
#define XMOD_CLI_FORMAT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xmod::cli {

enum class OutputFormat { kTable, kJson, kCsv };

// "table" | "json" | "csv"; INVALID_ARGUMENT naming --output otherwise.
absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view text);

// One cell: the text shown in tables and CSV. Numbers are right-aligned in tables; a missing
// value shows as "-" in tables and as an empty CSV field.
struct Cell {
  std::string text;
  bool numeric = false;
  bool missing = false;

  static Cell Str(absl::string_view s);
  static Cell Null();  // shown as "-"
  static Cell Int(int64_t v);
  static Cell Shown(absl::string_view shown);  // a number, already formatted as `shown`
  static Cell Num(double v);                   // a number shown with FormatNumber
  static Cell Bool(bool v);
};

struct Table {
  std::string title;                 // printed above the table in table format, if set
  std::vector<std::string> columns;  // header names
  std::vector<std::vector<Cell>> rows;

  void AddRow(std::vector<Cell> row) { rows.push_back(std::move(row)); }
};

// Aligned columns separated by two spaces, an upper-case header; strings left-aligned,
// numbers right-aligned. An empty table prints its header and "(no rows)".
std::string RenderText(const Table& table);
// Header row then data rows; fields quoted when they contain ',', '"' or a newline.
std::string RenderCsv(const Table& table);
// CSV for kCsv, else the text table (commands print JSON before they build a table).
std::string Render(const Table& table, OutputFormat format);

// Several tables (sections of a "show" command): text separates them by a blank line with
// titles; CSV by a blank line.
std::string RenderSections(const std::vector<Table>& sections, OutputFormat format);

// 3.9312 -> "3.9312"; 0 or NaN -> "-" when `zero_is_missing`.
std::string FormatLoss(double loss, bool zero_is_missing = true);
// 3.93e9 -> "3.93e9"; 1e20 -> "1.00e20"; 0 -> "0".
std::string FormatFlops(double flops);
// 2.635e9 -> "2.64B"; 543e6 -> "543M"; 87300 -> "87.3K"; 512 -> "512".
std::string FormatParams(double params);
// 50331648 -> "48.0 MiB": a size in bytes in binary units, as GPU memory is quoted.
std::string FormatBytes(int64_t bytes);
// Same scale letters in lower case for rates: 12345 -> "12.3k".
std::string FormatRate(double per_second);
// General numbers: integers as such, others with up to 4 significant decimals.
std::string FormatNumber(double v);
// Seconds -> "12.3s", "5m03s", "1h02m".
std::string FormatDuration(double seconds);
// Unix milliseconds -> local "YYYY-MM-DD HH:MM:SS"; 0 -> "-".
std::string FormatUnixMs(int64_t unix_ms);
// Fraction in [0, 1] -> "45%".
std::string FormatPercent(double fraction);

// Parses a count written as "2.64B", "556M", "300K", "1e9" or "12345".
absl::StatusOr<double> ParseCount(absl::string_view text);

}  // namespace xmod::cli

#endif  // XMOD_CLI_FORMAT_H_
