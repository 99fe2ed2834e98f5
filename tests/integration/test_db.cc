// Read-only database view and budgets for the cross-process tests: see test_db.h.
#include "tests/integration/test_db.h"

#include <utility>

#include "gtest/gtest.h"
#include "model/accounting/accounting.h"

namespace xmod {

ReadOnlyDb::ReadOnlyDb(const std::string& path) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << path << ": " << sqlite3_errmsg(db_);
  }
}

ReadOnlyDb::~ReadOnlyDb() { sqlite3_close(db_); }

std::vector<ReadOnlyDb::Row> ReadOnlyDb::Values(const std::string& sql) {
  std::vector<Row> rows;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
    return rows;
  }
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    Row row;
    for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
      const unsigned char* text = sqlite3_column_text(stmt, i);
      row.text.push_back(text != nullptr ? reinterpret_cast<const char*>(text) : "");
      row.number.push_back(sqlite3_column_double(stmt, i));
    }
    rows.push_back(std::move(row));
  }
  sqlite3_finalize(stmt);
  return rows;
}

std::vector<std::vector<std::string>> ReadOnlyDb::Rows(const std::string& sql) {
  std::vector<std::vector<std::string>> rows;
  for (Row& row : Values(sql)) rows.push_back(std::move(row.text));
  return rows;
}

double DenseBudget(int steps, int seq_len, int batch_tokens) {
  xmod::v1::ModelSpec model;
  model.set_arch(xmod::v1::DENSE);
  model.mutable_backbone()->set_name("tiny-test");
  absl::StatusOr<Accounting> accounting = Account(model, seq_len);
  if (!accounting.ok()) return 0;
  return accounting->train_flops_per_token * batch_tokens * steps;
}

}  // namespace xmod
