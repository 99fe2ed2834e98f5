// Every request is bounded in time, memory and count: the coordinator in-process on loopback
// ports with small limits, driven by real gRPC and HTTP clients — a query's time limit and
// LIKE pattern cap, a cancelled query freeing its slot, WatchSweep streams per credential and
// in all, the gRPC server's thread cap, the store's reader pool and dashboard sign-ins.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <httplib.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/clock.h"
#include "common/poll.h"
#include "coordinator/coordinator.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

constexpr char kAlice[] = "alice-secret-0123456789";
constexpr char kViewer[] = "viewer-secret-0123456789";
constexpr char kAuditor[] = "auditor-secret-0123456789";
constexpr char kCredentials[] =
    "user alice alice-secret-0123456789\n"
    "read viewer viewer-secret-0123456789\n"
    "read auditor auditor-secret-0123456789\n";

// A query no row limit ends: counts forever, one cheap step at a time.
constexpr char kEndlessQuery[] =
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n) SELECT count(*) FROM n";

std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  AttachBearerToken(token, context.get());
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return context;
}

class LimitsTest : public testing::Test {
 protected:
  // A coordinator with kCredentials and the options `customize` sets.
  void Start(const std::function<void(CoordinatorOptions&)>& customize) {
    dir_ = NewTestDir("limits");
    CoordinatorOptions options = LoopbackOptions(dir_);
    absl::StatusOr<CredentialSet> set = CredentialSet::Parse(kCredentials, "test");
    ASSERT_TRUE(set.ok()) << set.status();
    options.credentials = std::make_shared<const CredentialSet>(*std::move(set));
    customize(options);
    absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = *std::move(c);
    user_ = xmod::v1::Coordinator::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", coordinator_->ports().grpc),
                            grpc::InsecureChannelCredentials()));
  }

  // A sweep that stays active (no worker runs it), for streams to watch.
  int64_t SubmitActiveSweep() {
    xmod::v1::SubmitSweepRequest submit;
    *submit.mutable_spec() = TinySweep(dir_);
    xmod::v1::SubmitSweepResponse submitted;
    grpc::Status status = user_->SubmitSweep(As(kAlice).get(), submit, &submitted);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return submitted.sweep_id();
  }

  // An open WatchSweep stream: its context and reader.
  struct Watch {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReader<xmod::v1::WatchSweepEvent>> reader;
  };

  // Opens a stream as `token`; OK once its snapshot arrived (then `watch` holds it), else the
  // stream's status.
  grpc::Status OpenWatch(const std::string& token, int64_t sweep_id, Watch* watch) {
    watch->context = As(token);
    xmod::v1::WatchSweepRequest request;
    request.set_sweep_id(sweep_id);
    watch->reader = user_->WatchSweep(watch->context.get(), request);
    xmod::v1::WatchSweepEvent snapshot;
    if (watch->reader->Read(&snapshot)) return grpc::Status::OK;
    return watch->reader->Finish();
  }

  static void Close(Watch& watch) {
    watch.context->TryCancel();
    watch.reader->Finish().IgnoreError();
  }

  grpc::Status RunQuery(const std::string& sql, grpc::ClientContext* context) {
    xmod::v1::QueryRequest query;
    query.set_sql(sql);
    xmod::v1::QueryResponse rows;
    return user_->Query(context, query, &rows);
  }

  std::string dir_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<xmod::v1::Coordinator::Stub> user_;
};

TEST_F(LimitsTest, LongLikePatternsAreRefused) {
  // No query here may meet the time limit, however loaded the machine.
  Start([](CoordinatorOptions& options) { options.query.time_limit_ms = 600000; });
  // One LIKE match of a 40 kB pattern against a 1 MB value ran for a minute inside one
  // virtual-machine step; its pattern is now refused before it runs.
  grpc::Status status =
      RunQuery("SELECT printf('%.*c',1000000,'a') LIKE '%'||printf('%.*c',40000,'a')||'b'",
               As(kViewer).get());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(),
            "sql: a LIKE or GLOB pattern is longer than the limit of 256 bytes");
  EXPECT_TRUE(RunQuery("SELECT 'abc' LIKE '%b%'", As(kViewer).get()).ok());
}

TEST_F(LimitsTest, AQueryStopsAtItsTimeLimit) {
  // The time limit counts from the call (its wait for a connection included): only a query
  // that never ends is sure to meet so short a one.
  Start([](CoordinatorOptions& options) { options.query.time_limit_ms = 50; });
  grpc::Status status = RunQuery(kEndlessQuery, As(kViewer).get());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(), "sql: the query ran past its time limit of 50 ms");
}

// The type and bytes of `expression` ("text:6869"): a result that is not UTF-8 cannot travel
// in a QueryResponse.
std::string TypeAndHex(const std::string& expression) {
  return absl::StrCat("SELECT typeof(", expression, ") || ':' || hex(", expression, ")");
}

// TypeAndHex(`expression`) as SQLite's built-in functions compute it.
std::string BuiltIn(const std::string& expression) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  std::string out = "error";
  const std::string sql = TypeAndHex(expression);
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

TEST_F(LimitsTest, TrimInstrAndReplaceMatchSqliteInLinearTime) {
  Start([](CoordinatorOptions&) {});
  const char* expressions[] = {"trim('xxhixx', 'x')",
                               "ltrim('  a  ', ' ')",
                               "rtrim('\u00e9a\u00e9\u00e9', '\u00e9')",
                               "trim(NULL, 'a')",
                               "trim('a', NULL)",
                               "trim('abc', '')",
                               "ltrim('abcab', 'ba')",
                               "trim(CAST(x'c3c3a9' AS TEXT), CAST(x'c3' AS TEXT) || '\u00e9')",
                               "rtrim(12300, 0)",
                               "instr('h\u00e9llo', 'l')",
                               "instr(x'0102ff03', x'ff')",
                               "instr('abc', '')",
                               "instr('abc', 'd')",
                               "instr(NULL, 'a')",
                               "instr(12345, 34)",
                               "instr('', 'a')",
                               "instr(x'61e9', '\u00e9')",
                               "instr(CAST(x'80a9' AS TEXT), CAST(x'a9' AS TEXT))",
                               "instr(CAST(x'80a9' AS TEXT), CAST(x'80' AS TEXT))",
                               "replace('aaaa', 'aa', 'b')",
                               "replace('abc', '', 'x')",
                               "replace('h\u00e9\u00e9', '\u00e9', 'e')",
                               "replace(NULL, 'a', 'b')",
                               "replace('abc', 'b', NULL)",
                               "replace(123, 2, 'x')",
                               "replace(x'61', 'a', 'b')",
                               "replace('abab', 'ab', '')"};
  for (const char* expression : expressions) {
    xmod::v1::QueryRequest query;
    query.set_sql(TypeAndHex(expression));
    xmod::v1::QueryResponse rows;
    grpc::Status status = user_->Query(As(kViewer).get(), query, &rows);
    ASSERT_TRUE(status.ok()) << expression << ": " << status.error_message();
    ASSERT_EQ(rows.rows_size(), 1) << expression;
    EXPECT_EQ(rows.rows(0).values(0), BuiltIn(expression)) << expression;
  }
  // SQLite's own functions compare every position of the first argument with all of the
  // second, in one step: minutes for this trim, seconds for instr and replace.
  xmod::v1::QueryRequest query;
  query.set_sql(
      "SELECT length(trim(printf('%.*c', 1000000, 'b'), "
      "replace(printf('%.*c', 500000, 'x'), 'x', '\u00e9') || 'b')), "
      "instr(printf('%.*c', 1048000, 'a'), printf('%.*c', 524000, 'a') || 'b'), "
      "length(replace(printf('%.*c', 1048000, 'a'), printf('%.*c', 524000, 'a') || 'b', ''))");
  xmod::v1::QueryResponse rows;
  grpc::Status status = user_->Query(As(kViewer).get(), query, &rows);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(rows.rows_size(), 1);
  EXPECT_EQ(rows.rows(0).values(0), "0");
  EXPECT_EQ(rows.rows(0).values(1), "0");
  EXPECT_EQ(rows.rows(0).values(2), "1048000");
}

TEST_F(LimitsTest, ACancelledQueryIsInterruptedAndFreesItsSlot) {
  Start([](CoordinatorOptions& options) {
    options.query.max_concurrent = 1;
    options.query.time_limit_ms = 600000;  // only the cancel can end the endless query
  });
  grpc::ClientContext slow;
  AttachBearerToken(kViewer, &slow);
  grpc::Status slow_status;
  std::thread client([&] { slow_status = RunQuery(kEndlessQuery, &slow); });
  ASSERT_TRUE(
      PollUntil([&] { return coordinator_->store()->queries_running() == 1; }, absl::Seconds(30)));
  slow.TryCancel();
  client.join();
  EXPECT_EQ(slow_status.error_code(), grpc::StatusCode::CANCELLED);
  // The only query slot is free again: without the interrupt this one would wait 600 s.
  grpc::Status next = RunQuery("SELECT 1", As(kViewer).get());
  EXPECT_TRUE(next.ok()) << next.error_message();
  EXPECT_EQ(coordinator_->store()->queries_running(), 0);
}

TEST_F(LimitsTest, WatchStreamsAreCappedPerCredentialAndInAll) {
  Start([](CoordinatorOptions& options) {
    options.watch_streams.per_credential = 2;
    options.watch_streams.total = 3;
  });
  const int64_t sweep = SubmitActiveSweep();
  Watch v1, v2, v3, a1, x1;
  ASSERT_TRUE(OpenWatch(kViewer, sweep, &v1).ok());
  ASSERT_TRUE(OpenWatch(kViewer, sweep, &v2).ok());
  grpc::Status status = OpenWatch(kViewer, sweep, &v3);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(),
            "WatchSweep: read credential \"viewer\" already has 2 open streams (at most 2 per "
            "credential); try again when one has ended");
  ASSERT_TRUE(OpenWatch(kAlice, sweep, &a1).ok());
  status = OpenWatch(kAuditor, sweep, &x1);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(),
            "WatchSweep: 3 open streams in all (at most 3); try again later");
  // A closed stream frees its place (once the server has seen it go).
  Close(v1);
  EXPECT_TRUE(PollUntil([&] { return OpenWatch(kAuditor, sweep, &x1).ok(); }, absl::Seconds(30)));
  Close(v2);
  Close(a1);
  Close(x1);
}

TEST_F(LimitsTest, TheServerAnswersAgainAfterItsThreadCapWasHit) {
  Start([](CoordinatorOptions& options) {
    options.max_grpc_threads = 8;
    options.watch_streams.per_credential = 100;
    options.watch_streams.total = 100;
  });
  const int64_t sweep = SubmitActiveSweep();
  // Each open stream holds a server thread; the cap refuses further calls.
  std::vector<Watch> watches;
  grpc::Status refused;
  for (int i = 0; i < 64 && refused.ok(); ++i) {
    watches.emplace_back();
    refused = OpenWatch(kViewer, sweep, &watches.back());
    if (!refused.ok()) watches.pop_back();
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_LT(watches.size(), 8u);
  for (Watch& watch : watches) Close(watch);
  EXPECT_TRUE(PollUntil(
      [&] {
        xmod::v1::ListSweepsResponse sweeps;
        return user_->ListSweeps(As(kViewer).get(), {}, &sweeps).ok();
      },
      absl::Seconds(30)));
}

TEST(ReaderPoolTest, ReadersAreBoundedReusedAndRefusedPastTheWait) {
  const std::string dir = NewTestDir("readers");
  StoreOptions options;
  options.max_readers = 2;
  options.reader_wait_ms = 100;
  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(dir + "/x.db", options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;

  // Two reads hold both connections; a third waits, then is refused naming the limit.
  std::atomic<int> inside{0};
  absl::Notification release;
  std::vector<std::thread> holders;
  for (int i = 0; i < 2; ++i) {
    holders.emplace_back([&] {
      EXPECT_TRUE(store
                      .Read([&](Db&) {
                        ++inside;
                        release.WaitForNotificationWithTimeout(absl::Seconds(30));
                        return absl::OkStatus();
                      })
                      .ok());
    });
  }
  ASSERT_TRUE(PollUntil([&] { return inside == 2; }, absl::Seconds(30)));
  absl::Status refused = store.Read([](Db&) { return absl::OkStatus(); });
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "store: all 2 reader connections stayed busy for 100 ms (at most 2); try again");
  release.Notify();
  for (std::thread& t : holders) t.join();

  // Many concurrent reads share the same two connections.
  std::atomic<int> peak{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 8; ++i) {
    readers.emplace_back([&] {
      for (int j = 0; j < 20; ++j) {
        absl::Status s = store.Read([&](Db&) {
          int open = store.open_readers();
          int seen = peak.load();
          while (open > seen && !peak.compare_exchange_weak(seen, open)) {
          }
          return absl::OkStatus();
        });
        // A read may be refused after waiting 100 ms on a loaded machine; none may open a
        // third connection.
        EXPECT_TRUE(s.ok() || absl::IsResourceExhausted(s)) << s;
      }
    });
  }
  for (std::thread& t : readers) t.join();
  EXPECT_LE(peak.load(), 2);
  EXPECT_EQ(store.open_readers(), 2);
}

TEST_F(LimitsTest, SignInsAreRateLimitedAndNeverEndAnotherCredentialsSessions) {
  FakeClock clock;
  Start([&](CoordinatorOptions& options) {
    options.clock = &clock;
    options.sessions.max_sessions = 3;
    options.sessions.max_per_credential = 2;
    options.sessions.max_logins_per_minute = 4;
  });
  httplib::Client http("127.0.0.1", coordinator_->ports().http);
  // The session cookie of a sign-in, or the response's status and body when refused.
  const auto login = [&](const char* token) -> std::string {
    auto res = http.Post("/api/login", token, "text/plain");
    if (!res) return "no response";
    if (res->status != 200) return absl::StrCat(res->status, " ", res->body);
    const std::string cookie = res->get_header_value("Set-Cookie");
    return cookie.substr(0, cookie.find(';'));
  };
  const auto valid = [&](const std::string& session) {
    auto res = http.Get("/api/sweeps", {{"Cookie", session}});
    return res && res->status == 200;
  };
  const std::string a1 = login(kAlice);
  const std::string v1 = login(kViewer);
  const std::string v2 = login(kViewer);
  ASSERT_THAT(v2, testing::StartsWith("xmod_session="));
  // A credential past its own cap ends its own oldest session, nobody else's.
  const std::string v3 = login(kViewer);
  ASSERT_THAT(v3, testing::StartsWith("xmod_session="));
  EXPECT_FALSE(valid(v1));
  EXPECT_TRUE(valid(v2));
  EXPECT_TRUE(valid(a1));
  // All sessions taken: a sign-in is refused rather than ending someone's session.
  EXPECT_EQ(login(kAlice),
            "429 {\"error\":\"login: 3 dashboard sessions are open (at most 3); try again "
            "later\"}");
  EXPECT_TRUE(valid(a1));
  // Too many sign-ins of one credential in a minute.
  ASSERT_THAT(login(kViewer), testing::StartsWith("xmod_session="));
  EXPECT_EQ(login(kViewer),
            "429 {\"error\":\"login: credential \\\"viewer\\\" signed in 4 times in the last "
            "minute (at most 4 per minute); try again later\"}");
  EXPECT_TRUE(valid(a1));
  clock.Advance(60001);
  EXPECT_THAT(login(kViewer), testing::StartsWith("xmod_session="));
  EXPECT_TRUE(valid(a1));
}

}  // namespace
}  // namespace xmod
