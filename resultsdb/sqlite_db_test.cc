// Db::PrepareCached: a fixed statement is prepared once per connection and handed out again,
// reset and with its bindings cleared, once its Stmt is gone; the same text in use twice at
// once gets a second, uncached statement; SQL that does not prepare is an error and leaves
// nothing cached; ExecCached's errors read as Exec's; a cached statement follows a schema
// change.
#include "resultsdb/sqlite_db.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace xmod {
namespace {

std::unique_ptr<Db> OpenInMemory() {
  absl::StatusOr<std::unique_ptr<Db>> db =
      Db::Open(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, 1000);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? *std::move(db) : nullptr;
}

int64_t Count(Db& db, const std::string& sql) {
  absl::StatusOr<Stmt> stmt = db.Prepare(sql);
  EXPECT_TRUE(stmt.ok()) << stmt.status();
  EXPECT_TRUE(stmt->Step().value_or(false));
  return stmt->Int(0);
}

TEST(PrepareCachedTest, HandsOutTheSameStatementResetOnceItsStmtIsGone) {
  std::unique_ptr<Db> db = OpenInMemory();
  ASSERT_TRUE(db->Exec("CREATE TABLE t (a INTEGER, b TEXT)").ok());
  const char* insert = "INSERT INTO t (a, b) VALUES (?, ?)";
  sqlite3_stmt* first = nullptr;
  {
    absl::StatusOr<Stmt> stmt = db->PrepareCached(insert);
    ASSERT_TRUE(stmt.ok()) << stmt.status();
    first = stmt->raw();
    stmt->Bind(1, 1).Bind(2, "one");
    ASSERT_TRUE(stmt->Run().ok());
  }
  {
    absl::StatusOr<Stmt> stmt = db->PrepareCached(insert);
    ASSERT_TRUE(stmt.ok()) << stmt.status();
    EXPECT_EQ(stmt->raw(), first);
    stmt->Bind(1, 2);  // b unbound: the first use's "one" must not come back
    ASSERT_TRUE(stmt->Run().ok());
  }
  EXPECT_EQ(Count(*db, "SELECT COUNT(*) FROM t"), 2);
  EXPECT_EQ(Count(*db, "SELECT COUNT(*) FROM t WHERE a = 2 AND b IS NULL"), 1);
}

TEST(PrepareCachedTest, TheSameTextInUseTwiceGetsASecondStatement) {
  std::unique_ptr<Db> db = OpenInMemory();
  absl::StatusOr<Stmt> outer = db->PrepareCached("SELECT 1");
  ASSERT_TRUE(outer.ok());
  absl::StatusOr<Stmt> inner = db->PrepareCached("SELECT 1");
  ASSERT_TRUE(inner.ok());
  EXPECT_NE(outer->raw(), inner->raw());
  ASSERT_TRUE(outer->Step().value_or(false));
  ASSERT_TRUE(inner->Step().value_or(false));
  EXPECT_EQ(outer->Int(0) + inner->Int(0), 2);
}

TEST(PrepareCachedTest, SqlThatDoesNotPrepareIsAnErrorEveryTime) {
  std::unique_ptr<Db> db = OpenInMemory();
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Stmt> stmt = db->PrepareCached("SELECT * FROM missing");
    ASSERT_FALSE(stmt.ok());
    EXPECT_NE(stmt.status().message().find("missing"), std::string::npos) << stmt.status();
  }
  ASSERT_TRUE(db->Exec("CREATE TABLE missing (a INTEGER)").ok());
  EXPECT_TRUE(db->PrepareCached("SELECT * FROM missing").ok());
}

TEST(PrepareCachedTest, ExecCachedWordsItsErrorsAsExecDoes) {
  std::unique_ptr<Db> db = OpenInMemory();
  ASSERT_TRUE(db->Exec("CREATE TABLE t (a INTEGER UNIQUE)").ok());
  ASSERT_TRUE(db->ExecCached("INSERT INTO t VALUES (1)").ok());
  const absl::Status cached = db->ExecCached("INSERT INTO t VALUES (1)");
  const absl::Status plain = db->Exec("INSERT INTO t VALUES (1)");
  ASSERT_FALSE(cached.ok());
  EXPECT_EQ(cached, plain);
  EXPECT_EQ(cached.message(), "sqlite: UNIQUE constraint failed: t.a in: INSERT INTO t VALUES (1)");
  // Reset after the failure: the next use runs (and fails) the same way.
  EXPECT_EQ(db->ExecCached("INSERT INTO t VALUES (1)"), cached);
}

TEST(PrepareCachedTest, ACachedStatementFollowsASchemaChange) {
  std::unique_ptr<Db> db = OpenInMemory();
  ASSERT_TRUE(db->Exec("CREATE TABLE t (a INTEGER)").ok());
  ASSERT_TRUE(db->ExecCached("INSERT INTO t VALUES (1)").ok());
  sqlite3_stmt* before = nullptr;
  {
    absl::StatusOr<Stmt> select = db->PrepareCached("SELECT * FROM t");
    ASSERT_TRUE(select.ok());
    ASSERT_TRUE(select->Step().value_or(false));
    EXPECT_EQ(select->ColumnCount(), 1);
    before = select->raw();
  }
  ASSERT_TRUE(db->Exec("ALTER TABLE t ADD COLUMN b TEXT DEFAULT 'x'").ok());
  absl::StatusOr<Stmt> select = db->PrepareCached("SELECT * FROM t");
  ASSERT_TRUE(select.ok());
  EXPECT_EQ(select->raw(), before);
  ASSERT_TRUE(select->Step().value_or(false));
  EXPECT_EQ(select->ColumnCount(), 2);
  EXPECT_EQ(select->Text(1), "x");
}

}  // namespace
}  // namespace xmod
