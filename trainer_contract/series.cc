// See series.h.
#include "trainer_contract/series.h"

#include <map>

#include "absl/strings/match.h"
#include "common/enum_option_names.h"

namespace xmod {
namespace {

struct SeriesTable {
  std::map<int, std::string> by_number;
  std::vector<std::pair<std::string, std::string>> all;
};

const SeriesTable& Table() {
  static const SeriesTable* const table = [] {
    auto* t = new SeriesTable;
    const google::protobuf::EnumDescriptor* series = xmod::v1::Series_descriptor();
    t->by_number = EnumOptionNames(series, xmod::v1::series_name);
    for (const auto& [number, name] : t->by_number) {
      std::string short_name = series->FindValueByNumber(number)->name();
      if (absl::StartsWith(short_name, "SERIES_")) short_name.erase(0, 7);
      t->all.emplace_back(std::move(short_name), name);
    }
    return t;
  }();
  return *table;
}

}  // namespace

const std::string& SeriesName(xmod::v1::Series series) {
  return EnumOptionName(Table().by_number, series);
}

const std::vector<std::pair<std::string, std::string>>& AllSeries() { return Table().all; }

}  // namespace xmod
