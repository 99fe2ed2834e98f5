// The run listing's SQL (ListRuns with filters, a sort key and keyset pages; run_pages.proto):
// runs of a query in (sort key, run id) order, after a cursor, and how many runs the query
// matches. The API layer (coordinator/api/run_listing.h) turns pages into tokens and groups
// replicates. Run inside Store::Read; errors are INTERNAL.
#ifndef XMOD_COORDINATOR_STORE_RUN_PAGES_H_
#define XMOD_COORDINATOR_STORE_RUN_PAGES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"
#include "xmod/v1/run_pages.pb.h"
#include "xmod/v1/types.pb.h"

namespace xmod {

// The value a run sorts by: text for names, states, archs and backbones, else a number.
struct RunSortValue {
  bool text = false;
  std::string text_value;
  double number_value = 0;
};

// (sort value, run id) in the listing's order: SQLite's BINARY collation compares text as
// memcmp does, as std::string does. Both values must be of one sort key.
bool SortsBefore(const RunSortValue& a, int64_t a_id, const RunSortValue& b, int64_t b_id);

struct RunPageQuery {
  int64_t sweep_id = 0;                    // 0 = every sweep
  std::vector<xmod::v1::RunState> states;  // empty = every state
  xmod::v1::RunFilters filters;
  xmod::v1::RunSortKey sort = xmod::v1::RUN_SORT_ID;
  bool descending = false;
  // Only runs after this (sort value, run id) in the listing's order.
  std::optional<std::pair<RunSortValue, int64_t>> after;
  int limit = 0;  // 0 = every run
};

struct SortedRun {
  xmod::v1::Run run;
  RunSortValue key;  // of query.sort
};

// The query's runs in (sort key, run id) order (both reversed when descending).
absl::StatusOr<std::vector<SortedRun>> LoadRunPage(Db& db, const RunPageQuery& query);
// How many runs the query matches, ignoring `after` and `limit`.
absl::StatusOr<int64_t> CountRunPage(Db& db, const RunPageQuery& query);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_RUN_PAGES_H_
