// See series.h.
#include "trainer_contract/series.h"

#include <map>

#include "absl/strings/match.h"

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
    for (int i = 0; i < series->value_count(); ++i) {
      const google::protobuf::EnumValueDescriptor* value = series->value(i);
      const std::string& name = value->options().GetExtension(xmod::v1::series_name);
      if (name.empty()) continue;
      t->by_number[value->number()] = name;
      std::string short_name = value->name();
      if (absl::StartsWith(short_name, "SERIES_")) short_name.erase(0, 7);
      t->all.emplace_back(std::move(short_name), name);
    }
    return t;
  }();
  return *table;
}

}  // namespace

const std::string& SeriesName(xmod::v1::Series series) {
  static const std::string* const kNone = new std::string;
  const SeriesTable& table = Table();
  auto it = table.by_number.find(series);
  return it == table.by_number.end() ? *kNone : it->second;
}

const std::vector<std::pair<std::string, std::string>>& AllSeries() { return Table().all; }

}  // namespace xmod
