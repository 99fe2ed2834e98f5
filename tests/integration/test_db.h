// Helpers shared by the cross-process tests (integration, chaos): a read-only view of the
// coordinator's SQLite file, and the FLOP budget of a number of steps of the tiny model.
#ifndef XMOD_TESTS_INTEGRATION_TEST_DB_H_
#define XMOD_TESTS_INTEGRATION_TEST_DB_H_

#include <sqlite3.h>

#include <string>
#include <vector>

namespace xmod {

// The rows of queries on a read-only SQLite file. Failures are gtest failures.
class ReadOnlyDb {
 public:
  explicit ReadOnlyDb(const std::string& path);
  ~ReadOnlyDb();
  ReadOnlyDb(const ReadOnlyDb&) = delete;
  ReadOnlyDb& operator=(const ReadOnlyDb&) = delete;

  // Each row's columns as text ("" for NULL) and as doubles (exact for REAL columns).
  struct Row {
    std::vector<std::string> text;
    std::vector<double> number;
  };
  std::vector<Row> Values(const std::string& sql);

  // Each row's columns as text ("" for NULL).
  std::vector<std::vector<std::string>> Rows(const std::string& sql);

 private:
  sqlite3* db_ = nullptr;
};

// Training FLOPs of `steps` optimizer steps of the dense tiny-test model at `seq_len`, with
// `batch_tokens` tokens a step.
double DenseBudget(int steps, int seq_len, int batch_tokens);

}  // namespace xmod

#endif  // XMOD_TESTS_INTEGRATION_TEST_DB_H_
