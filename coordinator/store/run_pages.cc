// The run listing's SQL. See run_pages.h.
#include "coordinator/store/run_pages.h"

#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/store/store_reads.h"

namespace xmod {
namespace {

using Bound = std::variant<int64_t, double, std::string>;

// The SQL expression of a sort key over `runs r`, and whether it is text.
struct SortColumn {
  const char* sql;
  bool text;
};

SortColumn SortColumnOf(xmod::v1::RunSortKey key) {
  switch (key) {
    case xmod::v1::RUN_SORT_NAME:
      return {"r.name", true};
    case xmod::v1::RUN_SORT_STATE:
      return {"r.state", true};
    case xmod::v1::RUN_SORT_ARCH:
      return {"r.arch", true};
    case xmod::v1::RUN_SORT_K:
      return {"r.k", false};
    case xmod::v1::RUN_SORT_A:
      return {"COALESCE(r.a, 0)", false};
    case xmod::v1::RUN_SORT_SEQ_LEN:
      return {"r.seq_len", false};
    case xmod::v1::RUN_SORT_BACKBONE:
      return {"r.backbone", true};
    case xmod::v1::RUN_SORT_VAL_LOSS:
      return {"r.val_loss", false};
    case xmod::v1::RUN_SORT_CREATED:
      return {"r.created_ms", false};
    default:
      return {"r.id", false};
  }
}

// "column IN (?, ?, ...)" over `values`, appended to `where`, the values to `binds`.
template <typename Values, typename Convert>
void AddIn(const char* column, const Values& values, Convert convert,
           std::vector<std::string>* where, std::vector<Bound>* binds) {
  if (values.empty()) return;
  std::vector<std::string> marks;
  for (const auto& v : values) {
    marks.push_back("?");
    binds->push_back(convert(v));
  }
  where->push_back(absl::StrCat(column, " IN (", absl::StrJoin(marks, ", "), ")"));
}

// The WHERE conditions of the query's sweep, states and filters (not its cursor).
void AddFilters(const RunPageQuery& query, std::vector<std::string>* where,
                std::vector<Bound>* binds) {
  const xmod::v1::RunFilters& f = query.filters;
  if (query.sweep_id > 0) {
    where->push_back("r.sweep_id = ?");
    binds->push_back(query.sweep_id);
  }
  const auto state_name = [](xmod::v1::RunState s) -> Bound { return RunState_Name(s); };
  AddIn("r.state", query.states, state_name, where, binds);
  const auto arch_name = [](int a) -> Bound {
    return xmod::v1::Architecture_Name(static_cast<xmod::v1::Architecture>(a));
  };
  AddIn("r.arch", f.archs(), arch_name, where, binds);
  const auto integer = [](int v) -> Bound { return static_cast<int64_t>(v); };
  AddIn("r.k", f.ks(), integer, where, binds);
  AddIn(
      "COALESCE(r.a, 0)", f.as(), [](double v) -> Bound { return v; }, where, binds);
  AddIn("r.seq_len", f.seq_lens(), integer, where, binds);
  const auto text = [](const std::string& v) -> Bound { return v; };
  AddIn("r.backbone", f.backbones(), text, where, binds);
  if (!f.labels().empty()) {
    // A shared run's label joins its grids' labels with '+': match any whole part.
    std::vector<std::string> parts;
    for (const std::string& label : f.labels()) {
      parts.push_back("instr('+' || r.label || '+', '+' || ? || '+') > 0");
      binds->push_back(label);
    }
    where->push_back(absl::StrCat("(", absl::StrJoin(parts, " OR "), ")"));
  }
  if (!f.name_contains().empty()) {
    where->push_back("instr(r.name, ?) > 0");
    binds->push_back(f.name_contains());
  }
}

void BindAll(Stmt& stmt, const std::vector<Bound>& binds) {
  for (size_t i = 0; i < binds.size(); ++i) {
    std::visit([&](const auto& v) { stmt.Bind(static_cast<int>(i + 1), v); }, binds[i]);
  }
}

Bound SortBound(const RunSortValue& value) {
  if (value.text) return value.text_value;
  return value.number_value;
}

std::string WhereClause(const std::vector<std::string>& where) {
  return where.empty() ? "" : absl::StrCat(" WHERE ", absl::StrJoin(where, " AND "));
}

}  // namespace

bool SortsBefore(const RunSortValue& a, int64_t a_id, const RunSortValue& b, int64_t b_id) {
  if (a.text ? a.text_value != b.text_value : a.number_value != b.number_value) {
    return a.text ? a.text_value < b.text_value : a.number_value < b.number_value;
  }
  return a_id < b_id;
}

absl::StatusOr<std::vector<SortedRun>> LoadRunPage(Db& db, const RunPageQuery& query) {
  const SortColumn column = SortColumnOf(query.sort);
  std::vector<std::string> where;
  std::vector<Bound> binds;
  AddFilters(query, &where, &binds);
  const char* direction = query.descending ? "DESC" : "ASC";
  if (query.after) {
    // Keyset paging: (key, id) past the cursor's, as a row-value comparison.
    where.push_back(
        absl::StrCat("(", column.sql, ", r.id) ", query.descending ? "<" : ">", " (?, ?)"));
    binds.push_back(SortBound(query.after->first));
    binds.push_back(query.after->second);
  }
  std::string sql =
      absl::StrCat("SELECT ", kRunColumns, ", ", column.sql, " FROM runs r", WhereClause(where),
                   " ORDER BY ", column.sql, " ", direction, ", r.id ", direction);
  if (query.limit > 0) absl::StrAppend(&sql, " LIMIT ", query.limit);
  absl::StatusOr<Stmt> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  BindAll(*stmt, binds);
  std::vector<SortedRun> runs;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    SortedRun sorted{RunFromRow(*stmt), RunSortValue{column.text}};
    if (column.text) {
      sorted.key.text_value = stmt->Text(kRunColumnCount);
    } else {
      sorted.key.number_value = stmt->Double(kRunColumnCount);
    }
    runs.push_back(std::move(sorted));
  }
  return runs;
}

absl::StatusOr<int64_t> CountRunPage(Db& db, const RunPageQuery& query) {
  std::vector<std::string> where;
  std::vector<Bound> binds;
  AddFilters(query, &where, &binds);
  absl::StatusOr<Stmt> stmt =
      db.Prepare(absl::StrCat("SELECT COUNT(*) FROM runs r", WhereClause(where)));
  if (!stmt.ok()) return stmt.status();
  BindAll(*stmt, binds);
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return *row ? stmt->Int(0) : 0;
}

}  // namespace xmod
