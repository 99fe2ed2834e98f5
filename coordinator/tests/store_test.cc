// Store tests: schema and WAL, batched durable writes, the bulk lane that writes overtake,
// idempotent metrics, the canonical metrics view after a resume, read-only user queries.
#include "coordinator/store/store.h"

#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/store/design_rows.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/store_writes.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "resultsdb/schema.h"

namespace xmod {
namespace {

// One sweep with one run; returns the run id.
int64_t AddRun(Store& store) {
  int64_t run_id = 0;
  EXPECT_TRUE(store
                  .WriteAndWait([&](Db& db) {
                    xmod::v1::SweepSpec spec;
                    spec.set_name("s");
                    absl::StatusOr<int64_t> sweep = InsertSweep(db, spec, "", 1);
                    if (!sweep.ok()) return sweep.status();
                    xmod::v1::Run run;
                    run.set_name("r");
                    run.set_max_attempts(5);
                    run.mutable_spec()->mutable_training()->set_seq_len(64);
                    absl::StatusOr<int64_t> id = InsertRun(db, *sweep, run, 1);
                    if (!id.ok()) return id.status();
                    run_id = *id;
                    return absl::OkStatus();
                  })
                  .ok());
  return run_id;
}

std::vector<xmod::v1::MetricPoint> Points(const std::string& name, int from_step, int to_step) {
  std::vector<xmod::v1::MetricPoint> points;
  for (int s = from_step; s <= to_step; ++s) {
    xmod::v1::MetricPoint p;
    p.set_name(name);
    p.set_step(s);
    p.set_tokens(s * 128);
    p.set_flops(s * 1e9);
    p.set_value(10.0 - s * 0.1);
    points.push_back(p);
  }
  return points;
}

// The default server-side query limits with a 60 s time limit: far more than any query here
// needs on a loaded machine, so that only the tests that set their own time limit meet it.
QueryLimits Limits() {
  QueryLimits limits;
  limits.time_limit_ms = 60000;
  return limits;
}

int64_t Count(Store& store, const std::string& sql) {
  absl::StatusOr<QueryResult> r = store.Query(sql, 10, Limits());
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::stoll(r->rows[0][0]) : -1;
}

TEST(StoreTest, CreatesVersionedSchemaInWalMode) {
  const std::string dir = NewTestDir("schema");
  auto store = OpenStore(dir + "/x.db");
  ASSERT_NE(store, nullptr);
  absl::StatusOr<QueryResult> mode = store->Query("SELECT * FROM pragma_journal_mode", 1, Limits());
  ASSERT_TRUE(mode.ok()) << mode.status();
  EXPECT_EQ(mode->rows[0][0], "wal");
  EXPECT_EQ(Count(*store, "SELECT user_version FROM pragma_user_version"), kSchemaVersion);
  for (const char* table :
       {"sweeps", "runs", "attempts", "metrics", "checkpoints", "workers", "events", "fits",
        "run_summary", "flop_aligned_loss", "canonical_metrics"}) {
    EXPECT_EQ(Count(*store,
                    absl::StrCat("SELECT COUNT(*) FROM sqlite_master WHERE name = '", table, "'")),
              1)
        << table;
  }
  // Reopening an up-to-date database migrates nothing and keeps the data.
  const int64_t run = AddRun(*store);
  store.reset();
  store = OpenStore(dir + "/x.db");
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(Count(*store, absl::StrCat("SELECT COUNT(*) FROM runs WHERE id = ", run)), 1);
}

TEST(StoreTest, RefusesNewerSchema) {
  const std::string dir = NewTestDir("newer");
  { OpenStore(dir + "/x.db"); }
  {
    absl::StatusOr<std::unique_ptr<Db>> db = Db::Open(dir + "/x.db", SQLITE_OPEN_READWRITE, 1000);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 99").ok());
  }
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir + "/x.db", StoreOptions{});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(StoreTest, ConcurrentWritesAreBatchedAndDurable) {
  const std::string dir = NewTestDir("batch");
  int commits = 0;
  int max_batch = 0;
  StoreOptions options;
  options.on_commit = [&](double, int batch, const absl::Status&) {
    ++commits;
    max_batch = std::max(max_batch, batch);
  };
  {
    absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(dir + "/x.db", options);
    ASSERT_TRUE(opened.ok());
    Store& store = **opened;
    const int64_t run = AddRun(store);
    std::vector<std::future<absl::Status>> futures;
    for (int i = 0; i < 500; ++i) {
      futures.push_back(store.Write(
          [run, i](Db& db) { return InsertMetrics(db, run, 1, i, Points("train/loss", i, i)); }));
    }
    // A failing closure rolls back alone; its neighbours in the batch still commit.
    futures.push_back(store.Write([](Db& db) { return db.Exec("INSERT INTO nope VALUES (1)"); }));
    for (int i = 0; i < 499; ++i) EXPECT_TRUE(futures[i].get().ok());
    EXPECT_TRUE(futures[499].get().ok());
    EXPECT_FALSE(futures[500].get().ok());
  }  // closed: the writer drained
  EXPECT_LT(commits, 500) << "writes were not batched";
  EXPECT_GT(max_batch, 1);
  auto store = OpenStore(dir + "/x.db");
  EXPECT_EQ(Count(*store, "SELECT COUNT(*) FROM metrics"), 500);
}

// A store that records, for the lane tests, how many closures each transaction held and
// the order in which closures ran. Closures made by Hold() keep the writer inside them.
class RecordingStore {
 public:
  explicit RecordingStore(const std::string& name) {
    StoreOptions options;
    options.on_commit = [this](double, int batch, const absl::Status&) {
      batches_.push_back(batch);
    };
    absl::StatusOr<std::unique_ptr<Store>> opened =
        Store::Open(NewTestDir(name) + "/x.db", options);
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (opened.ok()) store_ = *std::move(opened);
  }

  Store& store() { return *store_; }
  Store::WriteFn Record(const std::string& name) {
    return [this, name](Db&) {
      order_.push_back(name);
      return absl::OkStatus();
    };
  }
  // A closure that, once the writer runs it, signals `running` and waits for `release`.
  Store::WriteFn Hold(const std::string& name, std::promise<void>& running,
                      std::shared_future<void> release) {
    return [this, name, &running, release](Db&) {
      running.set_value();
      release.wait();
      order_.push_back(name);
      return absl::OkStatus();
    };
  }
  // Closes the store (its writer drains both lanes) and returns what was recorded.
  std::pair<std::vector<std::string>, std::vector<int>> Close() {
    store_->Close();
    return {order_, batches_};
  }

 private:
  std::unique_ptr<Store> store_;
  std::vector<int> batches_;        // written by the writer thread, read once it is joined
  std::vector<std::string> order_;  // likewise
};

TEST(StoreTest, AWriteOvertakesBulkWritesQueuedBeforeItAndNoBulkWriteOvertakesAWrite) {
  RecordingStore recording("lanes");
  Store& store = recording.store();
  // The writer is held inside a first transaction while both lanes fill.
  std::promise<void> running;
  std::promise<void> release;
  std::vector<std::future<absl::Status>> done;
  done.push_back(store.Write(recording.Hold("held", running, release.get_future().share())));
  running.get_future().wait();
  done.push_back(store.WriteBulk(recording.Record("bulk 1")));
  done.push_back(store.WriteBulk(recording.Record("bulk 2")));
  done.push_back(store.Write(recording.Record("write 1")));
  done.push_back(store.WriteBulk(recording.Record("bulk 3")));
  done.push_back(store.Write(recording.Record("write 2")));
  release.set_value();
  for (std::future<absl::Status>& f : done) EXPECT_TRUE(f.get().ok());
  // Closing commits what is queued in either lane.
  std::future<absl::Status> last = store.WriteBulk(recording.Record("bulk 4"));
  const auto [order, batches] = recording.Close();
  EXPECT_TRUE(last.get().ok());
  EXPECT_THAT(order, testing::ElementsAre("held", "write 1", "write 2", "bulk 1", "bulk 2",
                                          "bulk 3", "bulk 4"));
  // One lane per transaction: the held one, both writes, the three bulk writes, the last.
  EXPECT_THAT(batches, testing::ElementsAre(1, 2, 3, 1));
}

TEST(StoreTest, AWriteThatWaitsTakesThePlaceOfTheBulkWritesNotRunAndCommitsWithThoseRun) {
  RecordingStore recording("lanes_yield");
  Store& store = recording.store();
  // A write holds the writer while three bulk writes queue; the first of them then holds
  // it again, inside the bulk transaction, while another write arrives.
  std::promise<void> held_running, held_release, bulk_running, bulk_release;
  std::vector<std::future<absl::Status>> done;
  done.push_back(
      store.Write(recording.Hold("held", held_running, held_release.get_future().share())));
  held_running.get_future().wait();
  done.push_back(
      store.WriteBulk(recording.Hold("bulk 1", bulk_running, bulk_release.get_future().share())));
  done.push_back(store.WriteBulk(recording.Record("bulk 2")));
  done.push_back(store.WriteBulk(recording.Record("bulk 3")));
  held_release.set_value();
  bulk_running.get_future().wait();
  done.push_back(store.Write(recording.Record("write")));
  bulk_release.set_value();
  for (std::future<absl::Status>& f : done) EXPECT_TRUE(f.get().ok());
  const auto [order, batches] = recording.Close();
  // The bulk transaction ran "bulk 1", then the write in place of "bulk 2" and "bulk 3",
  // and committed both; the rest went in the next one.
  EXPECT_THAT(order, testing::ElementsAre("held", "bulk 1", "write", "bulk 2", "bulk 3"));
  EXPECT_THAT(batches, testing::ElementsAre(1, 2, 2));
}

TEST(StoreTest, AFailedCommitFailsTheWriteThatJoinedItAndNotTheBulkWritesItTookThePlaceOf) {
  RecordingStore recording("lanes_fail");
  Store& store = recording.store();
  std::promise<void> held_running, held_release, bulk_running, bulk_release, next_running,
      next_release;
  std::future<absl::Status> held =
      store.Write(recording.Hold("held", held_running, held_release.get_future().share()));
  held_running.get_future().wait();
  std::future<absl::Status> bulk_1 =
      store.WriteBulk(recording.Hold("bulk 1", bulk_running, bulk_release.get_future().share()));
  std::future<absl::Status> bulk_2 =
      store.WriteBulk(recording.Hold("bulk 2", next_running, next_release.get_future().share()));
  held_release.set_value();
  bulk_running.get_future().wait();
  std::future<absl::Status> write = store.Write(recording.Record("write"));
  // The transaction of "bulk 1" and the write that takes the place of "bulk 2" fails.
  store.TEST_FailCommits(absl::ResourceExhaustedError("database or disk is full"));
  bulk_release.set_value();
  EXPECT_TRUE(held.get().ok());
  EXPECT_TRUE(absl::IsResourceExhausted(bulk_1.get()));
  EXPECT_TRUE(absl::IsResourceExhausted(write.get()));
  // "bulk 2" went back to its lane, untouched, and runs in the next transaction.
  next_running.get_future().wait();
  store.TEST_FailCommits(absl::OkStatus());
  next_release.set_value();
  EXPECT_TRUE(bulk_2.get().ok());
  const auto [order, batches] = recording.Close();
  EXPECT_THAT(order, testing::ElementsAre("held", "bulk 1", "write", "bulk 2"));
  EXPECT_THAT(batches, testing::ElementsAre(1, 2, 1));
}

TEST(StoreTest, MetricReplayIsIdempotent) {
  const std::string dir = NewTestDir("idem");
  auto store = OpenStore(dir + "/x.db");
  const int64_t run = AddRun(*store);
  for (int replay = 0; replay < 3; ++replay) {
    ASSERT_TRUE(store
                    ->WriteAndWait([&](Db& db) {
                      return InsertMetrics(db, run, 1, 0, Points("train/loss", 0, 9));
                    })
                    .ok());
  }
  EXPECT_EQ(Count(*store, "SELECT COUNT(*) FROM metrics"), 10);
}

TEST(StoreTest, CanonicalViewDropsSupersededRowsAfterResume) {
  const std::string dir = NewTestDir("canon");
  auto store = OpenStore(dir + "/x.db");
  const int64_t run = AddRun(*store);
  ASSERT_TRUE(store
                  ->WriteAndWait([&](Db& db) {
                    AttemptStart a1{run, 1, 1, "w", "0", 10, 0, 100};
                    if (auto s = InsertAttempt(db, a1); !s.ok()) return s;
                    // Attempt 1 logs steps 1..10, then is lost; attempt 2 resumes at step 6.
                    if (auto s = InsertMetrics(db, run, 1, 0, Points("val/loss", 1, 10)); !s.ok())
                      return s;
                    AttemptStart a2{run, 2, 1, "w", "0", 20, 6, 200};
                    if (auto s = InsertAttempt(db, a2); !s.ok()) return s;
                    return InsertMetrics(db, run, 2, 0, Points("val/loss", 7, 12));
                  })
                  .ok());
  // Attempt 1's steps 1..6 and attempt 2's steps 7..12: one row per step.
  EXPECT_EQ(Count(*store, "SELECT COUNT(*) FROM canonical_metrics"), 12);
  EXPECT_EQ(Count(*store, "SELECT COUNT(DISTINCT step) FROM canonical_metrics"), 12);
  EXPECT_EQ(Count(*store, "SELECT MAX(step) FROM canonical_metrics WHERE attempt = 1"), 6);
  EXPECT_EQ(Count(*store, "SELECT COUNT(*) FROM flop_aligned_loss"), 12);
  absl::StatusOr<QueryResult> summary =
      store->Query("SELECT final_val_loss FROM run_summary", 10, Limits());
  ASSERT_TRUE(summary.ok());
  EXPECT_DOUBLE_EQ(std::stod(summary->rows[0][0]), 10.0 - 12 * 0.1);

  // A fresh restart (resumed_from_step 0) supersedes every row of the earlier attempts.
  ASSERT_TRUE(store
                  ->WriteAndWait([&](Db& db) {
                    AttemptStart a3{run, 3, 1, "w", "0", 30, 0, 300};
                    return InsertAttempt(db, a3);
                  })
                  .ok());
  EXPECT_EQ(Count(*store, "SELECT COUNT(*) FROM canonical_metrics"), 0);
}

// What is not known yet or does not apply is stored NULL, and reads back as the proto's 0.
TEST(StoreTest, MissingValuesAreStoredAsNull) {
  const std::string dir = NewTestDir("nulls");
  auto store = OpenStore(dir + "/x.db");
  const int64_t run = AddRun(*store);  // no anchors (A = 0), not MOE, never started
  const std::string where = absl::StrCat(" FROM runs WHERE id = ", run);
  EXPECT_EQ(Count(*store,
                  "SELECT started_ms IS NULL AND finished_ms IS NULL AND train_loss IS"
                  " NULL AND val_loss IS NULL AND tokens_per_second IS NULL AND a IS NULL"
                  " AND moe IS NULL" +
                      where),
            1);

  xmod::v1::Progress train_only;  // no evaluation yet: val_loss stays unknown
  train_only.set_train_loss(5.5);
  ASSERT_TRUE(store
                  ->WriteAndWait([&](Db& db) {
                    if (auto s = MarkRunStarted(db, run, 1000); !s.ok()) return s;
                    if (auto s = MarkRunStarted(db, run, 2000); !s.ok()) return s;
                    if (auto s = UpdateProgress(db, run, train_only); !s.ok()) return s;
                    if (auto s = InsertAttempt(db, {run, 1, 1, "w", "0", 1000, 0, 9000}); !s.ok())
                      return s;
                    return InsertAttempt(db, {run, 2, 1, "w", "0", 3000, 0, 9000});
                  })
                  .ok());
  EXPECT_EQ(Count(*store, "SELECT started_ms" + where), 1000);  // the first start only
  EXPECT_EQ(Count(*store, "SELECT val_loss IS NULL AND train_loss = 5.5" + where), 1);
  // Open attempts have no end and no exit code.
  EXPECT_EQ(Count(*store,
                  "SELECT COUNT(*) FROM attempts WHERE ended_ms IS NULL AND exit_code IS"
                  " NULL"),
            2);

  ASSERT_TRUE(store
                  ->WriteAndWait([&](Db& db) {
                    if (auto s = EndAttempt(db, run, 1, "lost", 0, "lease expired", 2000); !s.ok())
                      return s;
                    if (auto s = EndAttempt(db, run, 2, "failed", 4, "diverged", 4000); !s.ok())
                      return s;
                    RunUpdate failed;
                    failed.run_id = run;
                    failed.finished_ms = 4000;
                    return UpdateRun(db, failed);
                  })
                  .ok());
  EXPECT_EQ(Count(*store,
                  "SELECT exit_code IS NULL AND ended_ms = 2000 FROM attempts"
                  " WHERE attempt = 1"),
            1);  // lost: no exit was seen
  EXPECT_EQ(Count(*store, "SELECT exit_code FROM attempts WHERE attempt = 2"), 4);
  EXPECT_EQ(Count(*store, "SELECT finished_ms" + where), 4000);
  ASSERT_TRUE(store
                  ->WriteAndWait([&](Db& db) {
                    RunUpdate resumed;
                    resumed.run_id = run;
                    resumed.finished_ms = 0;
                    return UpdateRun(db, resumed);
                  })
                  .ok());
  EXPECT_EQ(Count(*store, "SELECT finished_ms IS NULL" + where), 1);

  // A study's failed fit: no sweep, no params, n_obs or cv. A sweep's fit: no study.
  xmod::v1::Fit study_fit;
  study_fit.set_study_id(7);
  study_fit.set_created_unix_ms(5000);
  study_fit.set_error("too few runs");
  xmod::v1::Fit sweep_fit;
  sweep_fit.set_sweep_id(1);
  sweep_fit.set_created_unix_ms(6000);
  sweep_fit.set_n_obs(3);
  ASSERT_TRUE(store
                  ->WriteAndWait([&](Db& db) {
                    if (auto s = InsertFit(db, study_fit).status(); !s.ok()) return s;
                    return InsertFit(db, sweep_fit).status();
                  })
                  .ok());
  EXPECT_EQ(Count(*store,
                  "SELECT sweep_id IS NULL AND params IS NULL AND n_obs IS NULL AND cv IS"
                  " NULL AND r2 IS NULL FROM fits WHERE study_id = 7"),
            1);
  EXPECT_EQ(Count(*store, "SELECT study_id IS NULL AND n_obs = 3 FROM fits WHERE sweep_id = 1"), 1);

  // Read back, NULL is the proto's 0 ("none").
  ASSERT_TRUE(store
                  ->Read([&](Db& db) {
                    absl::StatusOr<xmod::v1::Run> r = LoadRun(db, run);
                    EXPECT_TRUE(r.ok()) << r.status();
                    if (r.ok()) {
                      EXPECT_EQ(r->finished_unix_ms(), 0);
                      EXPECT_EQ(r->progress().val_loss(), 0);
                      EXPECT_EQ(r->progress().train_loss(), 5.5);
                    }
                    absl::StatusOr<std::vector<xmod::v1::Attempt>> attempts = LoadAttempts(db, run);
                    EXPECT_TRUE(attempts.ok()) << attempts.status();
                    if (attempts.ok() && attempts->size() == 2) {
                      EXPECT_EQ((*attempts)[0].exit_code(), 0);
                      EXPECT_EQ((*attempts)[1].exit_code(), 4);
                    }
                    absl::StatusOr<LatestFits> fits = LoadLatestStudyFits(db, 7);
                    EXPECT_TRUE(fits.ok()) << fits.status();
                    if (fits.ok()) {
                      EXPECT_FALSE(fits->ok.has_value());
                      EXPECT_TRUE(fits->failed.has_value());
                    }
                    if (fits.ok() && fits->failed.has_value()) {
                      EXPECT_EQ(fits->failed->sweep_id(), 0);
                      EXPECT_EQ(fits->failed->error(), "too few runs");
                    }
                    return absl::OkStatus();
                  })
                  .ok());
}

TEST(StoreTest, MetricsAreDownsampledEvenly) {
  const std::string dir = NewTestDir("down");
  auto store = OpenStore(dir + "/x.db");
  const int64_t run = AddRun(*store);
  ASSERT_TRUE(store
                  ->WriteAndWait([&](Db& db) {
                    return InsertMetrics(db, run, 1, 0, Points("train/loss", 0, 100));
                  })
                  .ok());
  ASSERT_TRUE(store
                  ->Read([&](Db& db) {
                    auto series = LoadMetrics(db, run, {}, 11);
                    EXPECT_TRUE(series.ok());
                    EXPECT_EQ(series->size(), 1u);
                    const auto& points = (*series)[0].points();
                    EXPECT_EQ(points.size(), 11);
                    EXPECT_EQ(points[0].step(), 0);
                    EXPECT_EQ(points[5].step(), 50);
                    EXPECT_EQ(points[10].step(), 100);
                    return absl::OkStatus();
                  })
                  .ok());
}

TEST(StoreTest, UserQueriesAreReadOnly) {
  const std::string dir = NewTestDir("ro");
  auto store = OpenStore(dir + "/x.db");
  AddRun(*store);
  for (const char* sql :
       {"DELETE FROM runs", "UPDATE runs SET state = 'x'", "DROP TABLE runs",
        "INSERT INTO events (time_ms, kind) VALUES (1, 'x')", "PRAGMA user_version = 5",
        "ATTACH DATABASE '/tmp/x' AS y", "SELECT 1; DELETE FROM runs",
        "WITH x AS (SELECT 1) DELETE FROM runs", "SELECT * FROM no_such_table"}) {
    absl::StatusOr<QueryResult> r = store->Query(sql, 10, Limits());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << sql;
  }
  EXPECT_EQ(Count(*store, "SELECT COUNT(*) FROM runs"), 1);
  // The row cap truncates.
  absl::StatusOr<QueryResult> r = store->Query(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50) "
      "SELECT i FROM n",
      20, Limits());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows.size(), 20u);
  EXPECT_TRUE(r->truncated);
  // A runaway query hits the time limit.
  QueryLimits quick = Limits();
  quick.time_limit_ms = 50;
  r = store->Query(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n", 10,
      quick);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(), "sql: the query ran past its time limit of 50 ms");
}

TEST(StoreTest, UserQueriesHaveServerSideCeilings) {
  const std::string dir = NewTestDir("limits");
  auto store = OpenStore(dir + "/x.db");
  // Gigabytes of zeroblobs (the example): refused at the response limit, after
  // copying at most that much.
  const std::string blobs =
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<10000) "
      "SELECT zeroblob(1000000) FROM n";
  absl::StatusOr<QueryResult> r = store->Query(blobs, 100000, Limits());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(),
            "sql: the result exceeds the limit of 16777216 bytes per response after 16 rows; "
            "select fewer rows or columns, or shorter values");
  // The same sorted: the sort would hold every blob before the first row; stopped at the
  // memory allowance.
  r = store->Query(blobs + " ORDER BY random()", 10, Limits());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(),
            "sql: the query needs more than its memory limit of 268435456 bytes (sorts and "
            "temporary tables)");
  // One value longer than a cell may be.
  r = store->Query("SELECT zeroblob(2000000)", 10, Limits());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(), "sql: a value exceeds the limit of 1048576 bytes per cell");
  // Intermediate values too: a 2 MB group_concat whose length alone is returned.
  r = store->Query(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<1000) "
      "SELECT length(group_concat(hex(zeroblob(1000)))) FROM n",
      10, Limits());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  // The client's max_rows cannot lift the server's row ceiling.
  QueryLimits few = Limits();
  few.max_rows = 5;
  r = store->Query(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<100) SELECT i FROM n",
      1000000, few);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows.size(), 5u);
  EXPECT_TRUE(r->truncated);
  // Within every limit: answered.
  r = store->Query("SELECT length(zeroblob(1000000))", 0, Limits());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows[0][0], "1000000");
}

TEST(StoreTest, UserQueriesRunAtMostMaxConcurrentAtOnce) {
  const std::string dir = NewTestDir("concurrent");
  auto store = OpenStore(dir + "/x.db");
  QueryLimits one = Limits();
  one.max_concurrent = 1;
  one.time_limit_ms = 300;
  // The first query occupies the only query connection for its whole time limit; a second
  // one started meanwhile waits for it and gives up with RESOURCE_EXHAUSTED, or (if the
  // first already ended) runs into the time limit itself. Either way it never runs beside it.
  const std::string runaway =
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n";
  absl::StatusOr<QueryResult> first;
  std::thread t([&] { first = store->Query(runaway, 1, one); });
  absl::StatusOr<QueryResult> second = store->Query(runaway, 1, one);
  t.join();
  EXPECT_EQ(first.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  // The connection went back to the pool: later queries run.
  EXPECT_EQ(Count(*store, "SELECT 7"), 7);
}

// The details of SQLite's plan of `sql`, one per line.
std::string QueryPlan(Store& store, const std::string& sql) {
  std::string plan;
  EXPECT_TRUE(store
                  .Read([&](Db& db) {
                    absl::StatusOr<Stmt> explain = db.Prepare("EXPLAIN QUERY PLAN " + sql);
                    if (!explain.ok()) return explain.status();
                    while (explain->Step().value_or(false)) {
                      absl::StrAppend(&plan, explain->Text(3), "\n");
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  return plan;
}

// The sweep monitor's poll (twice a second) reads each run's val/loss rows through
// metrics_by_name: never every metric row of a run.
TEST(StoreTest, TheValLossPollReadsOnlyValLossRows) {
  std::unique_ptr<Store> store = OpenStore(NewTestDir("val_loss_plan") + "/x.db");
  ASSERT_NE(store, nullptr);
  for (const std::vector<int64_t>& also : {std::vector<int64_t>{}, std::vector<int64_t>{7}}) {
    const std::string plan = QueryPlan(*store, ValLossCountsSql(also));
    EXPECT_NE(plan.find("SEARCH m USING INDEX metrics_by_name (run_id=? AND name=?)"),
              std::string::npos)
        << plan;
    EXPECT_EQ(plan.find("SCAN m"), std::string::npos) << plan;
  }
}

// One series of a run, through the canonical_metrics view as GetMetrics, the runs list's
// final_val_loss and the fitter read it, goes through metrics_by_name: the planner statistics
// of schema version 12 say a name is selective. Without them SQLite chose the primary key
// (run_id, attempt, seq) and read every point of the run to return one series.
TEST(StoreTest, OneSeriesOfARunIsReadThroughTheNameIndex) {
  std::unique_ptr<Store> store = OpenStore(NewTestDir("series_plan") + "/x.db");
  ASSERT_NE(store, nullptr);
  for (const std::string sql :
       {"SELECT name, step, tokens, flops, value, attempt FROM canonical_metrics"
        " WHERE run_id = 1 AND name IN ('val/loss')",
        "SELECT final_val_loss FROM run_summary WHERE run_id = 1"}) {
    const std::string plan = QueryPlan(*store, sql);
    EXPECT_NE(plan.find("USING INDEX metrics_by_name (run_id=? AND name=?)"), std::string::npos)
        << sql << "\n"
        << plan;
  }
  // A run's every series still reads the table in key order.
  EXPECT_NE(QueryPlan(*store, "SELECT * FROM canonical_metrics WHERE run_id = 1")
                .find("SEARCH m USING PRIMARY KEY (run_id=?)"),
            std::string::npos);
}

}  // namespace
}  // namespace xmod
