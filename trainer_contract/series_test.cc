// SeriesName and AllSeries (series.h) read the one definition in series.proto: every series
// has a distinct name, and the names the fit and the dashboard rely on are what the results
// database has always stored.
#include "trainer_contract/series.h"

#include <set>

#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(SeriesTest, EverySeriesHasADistinctName) {
  const auto& all = AllSeries();
  ASSERT_EQ(all.size(), xmod::v1::Series_descriptor()->value_count() - 1u);
  std::set<std::string> names;
  for (const auto& [value, name] : all) {
    EXPECT_FALSE(name.empty()) << value;
    EXPECT_TRUE(names.insert(name).second) << name << " repeats";
  }
  EXPECT_EQ(all.front().first, "TRAIN_LOSS");
}

TEST(SeriesTest, NamesAreTheStoredOnes) {
  EXPECT_EQ(SeriesName(xmod::v1::SERIES_TRAIN_LOSS), "train/loss");
  EXPECT_EQ(SeriesName(xmod::v1::SERIES_VAL_LOSS), "val/loss");
  EXPECT_EQ(SeriesName(xmod::v1::SERIES_TOKENS_PER_SECOND), "perf/tokens_per_second");
  EXPECT_EQ(SeriesName(xmod::v1::SERIES_LIVE_DELTA), "delta/live");
  EXPECT_EQ(SeriesName(xmod::v1::SERIES_EVAL_PREFIX), "eval/");
  EXPECT_EQ(SeriesName(xmod::v1::SERIES_UNSPECIFIED), "");
  EXPECT_EQ(SeriesName(static_cast<xmod::v1::Series>(9999)), "");
}

}  // namespace
}  // namespace xmod
