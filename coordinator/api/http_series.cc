// See http_series.h.
#include "coordinator/api/http_series.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer_contract/series.h"

namespace xmod {

std::string SeriesScript() {
  std::vector<std::string> entries;
  // Series names are plain ASCII without quotes or backslashes (series_test.cc).
  for (const auto& [value, name] : AllSeries()) {
    entries.push_back(absl::StrCat("  ", value, ": \"", name, "\""));
  }
  return absl::StrCat(
      "// The metric series' names, from the coordinator's one definition (xmod.v1.Series).\n"
      "const XmodSeries = Object.freeze({\n",
      absl::StrJoin(entries, ",\n"), "\n});\n");
}

void GetSeriesScript(const HttpContext&, const httplib::Request&, httplib::Response& response) {
  static const std::string* const script = new std::string(SeriesScript());
  response.set_header("Cache-Control", "no-cache");
  response.set_content(*script, "text/javascript; charset=utf-8");
}

}  // namespace xmod
