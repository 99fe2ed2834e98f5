// ListRuns at scale (run_listing.h), through a real gRPC stub and the HTTP route of an
// in-process coordinator: filters, sort keys, keyset pages that stay whole while runs are
// added, replicate groups with their statistics, and the refusals that name the field.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <httplib.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/poll.h"
#include "coordinator/api/http_events.h"
#include "coordinator/coordinator.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using xmod::v1::ListRunsRequest;
using xmod::v1::ListRunsResponse;

class RunListingTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("run_listing");
    absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(LoopbackOptions(dir_));
    ASSERT_TRUE(c.ok()) << c.status();
    loopback_ = *std::move(c);
  }

  // TinySweep with three seeds: dense, X-MoD K=2 and K=4, each three times (9 runs).
  int64_t SubmitReplicated(const std::string& name) {
    xmod::v1::SubmitSweepRequest submit;
    *submit.mutable_spec() = TinySweep(dir_);
    submit.mutable_spec()->set_name(name);
    for (uint64_t seed : {11, 12, 13}) submit.mutable_spec()->mutable_grids(0)->add_seeds(seed);
    xmod::v1::SubmitSweepResponse submitted;
    grpc::ClientContext context;
    EXPECT_TRUE(loopback_.user->SubmitSweep(&context, submit, &submitted).ok());
    return submitted.sweep_id();
  }

  grpc::Status List(const ListRunsRequest& request, ListRunsResponse* response) {
    grpc::ClientContext context;
    return loopback_.user->ListRuns(&context, request, response);
  }

  // Every page of `request`, `page_size` at a time; calls `between` after the first page.
  std::vector<xmod::v1::Run> AllPages(ListRunsRequest request, int page_size,
                                      const std::function<void()>& between = nullptr) {
    request.set_page_size(page_size);
    std::vector<xmod::v1::Run> runs;
    for (int page = 0; page < 100; ++page) {
      ListRunsResponse response;
      grpc::Status status = List(request, &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_LE(response.runs_size(), page_size);
      runs.insert(runs.end(), response.runs().begin(), response.runs().end());
      if (response.next_page_token().empty()) return runs;
      request.set_page_token(response.next_page_token());
      if (page == 0 && between) between();
    }
    ADD_FAILURE() << "more than 100 pages";
    return runs;
  }

  void Write(const std::string& sql) {
    ASSERT_TRUE(
        loopback_.coordinator->store()->WriteAndWait([&](Db& db) { return db.Exec(sql); }).ok());
  }

  std::string dir_;
  LoopbackCoordinator loopback_;
};

std::vector<std::string> Names(const std::vector<xmod::v1::Run>& runs) {
  std::vector<std::string> names;
  for (const auto& r : runs) names.push_back(r.name());
  return names;
}

TEST_F(RunListingTest, PagesSortedByNameHoldEveryRunOnce) {
  const int64_t sweep = SubmitReplicated("replicated");
  ListRunsRequest request;
  request.set_sweep_id(sweep);
  request.set_sort(xmod::v1::RUN_SORT_NAME);
  ListRunsResponse whole;
  ASSERT_TRUE(List(request, &whole).ok());
  ASSERT_EQ(whole.runs_size(), 9);
  EXPECT_EQ(whole.total_size(), 9);
  EXPECT_TRUE(whole.next_page_token().empty());
  std::vector<std::string> sorted = Names({whole.runs().begin(), whole.runs().end()});
  EXPECT_TRUE(std::is_sorted(sorted.begin(), sorted.end()));

  EXPECT_EQ(Names(AllPages(request, 4)), sorted);
  EXPECT_EQ(Names(AllPages(request, 1)), sorted);
  request.set_descending(true);
  std::vector<std::string> reversed(sorted.rbegin(), sorted.rend());
  EXPECT_EQ(Names(AllPages(request, 2)), reversed);

  ListRunsResponse first;
  request.set_page_size(4);
  ASSERT_TRUE(List(request, &first).ok());
  EXPECT_EQ(first.total_size(), 9);
  EXPECT_FALSE(first.next_page_token().empty());
}

TEST_F(RunListingTest, PagesStayWholeWhileRunsAreAddedAndChange) {
  const int64_t sweep = SubmitReplicated("first");
  ListRunsRequest request;  // every sweep, by name: the new sweep's runs interleave
  request.set_sort(xmod::v1::RUN_SORT_NAME);
  int64_t second = 0;
  std::vector<xmod::v1::Run> runs = AllPages(request, 2, [&] {
    second = SubmitReplicated("second");
    // A sort-key change of a run not yet listed moves it, but it is still listed once.
    Write(absl::StrCat("UPDATE runs SET val_loss = 3.5 WHERE sweep_id = ", sweep));
  });
  std::set<int64_t> ids;
  int of_first = 0;
  for (const auto& r : runs) {
    EXPECT_TRUE(ids.insert(r.id()).second) << "run " << r.id() << " listed twice";
    of_first += r.sweep_id() == sweep;
  }
  EXPECT_EQ(of_first, 9);  // none of the first sweep's runs was skipped
  EXPECT_GT(second, sweep);
  EXPECT_TRUE(std::is_sorted(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
    return a.name() != b.name() ? a.name() < b.name() : a.id() < b.id();
  }));
}

TEST_F(RunListingTest, FiltersNarrowTheListing) {
  const int64_t sweep = SubmitReplicated("filtered");
  const auto count = [&](const std::function<void(ListRunsRequest&)>& set) {
    ListRunsRequest request;
    request.set_sweep_id(sweep);
    set(request);
    ListRunsResponse response;
    grpc::Status status = List(request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.total_size(), response.runs_size());
    return response.runs_size();
  };
  EXPECT_EQ(count([](auto& r) { r.mutable_filters()->add_archs(xmod::v1::XMOD); }), 6);
  EXPECT_EQ(count([](auto& r) { r.mutable_filters()->add_archs(xmod::v1::DENSE); }), 3);
  EXPECT_EQ(count([](auto& r) { r.mutable_filters()->add_ks(4); }), 3);
  EXPECT_EQ(count([](auto& r) {
              r.mutable_filters()->add_ks(2);
              r.mutable_filters()->add_ks(4);
            }),
            6);
  EXPECT_EQ(count([](auto& r) { r.mutable_filters()->add_as(1); }), 6);  // dense has no A
  EXPECT_EQ(count([](auto& r) { r.mutable_filters()->add_as(0); }), 3);
  EXPECT_EQ(count([](auto& r) { r.mutable_filters()->add_seq_lens(64); }), 9);
  EXPECT_EQ(count([](auto& r) { r.mutable_filters()->add_seq_lens(128); }), 0);
  EXPECT_EQ(count([](auto& r) { r.mutable_filters()->add_backbones("tiny-test"); }), 9);
  EXPECT_EQ(count([](auto& r) { r.mutable_filters()->add_labels("kx"); }), 9);
  EXPECT_EQ(count([](auto& r) { r.mutable_filters()->add_labels("k"); }), 0);  // whole labels
  EXPECT_EQ(count([](auto& r) { r.mutable_filters()->set_name_contains("-K2-"); }), 3);
  EXPECT_EQ(count([](auto& r) { r.mutable_filters()->set_name_contains("-s12"); }), 3);
  EXPECT_EQ(count([](auto& r) { r.add_states(xmod::v1::QUEUED); }), 9);
  EXPECT_EQ(count([](auto& r) { r.add_states(xmod::v1::SUCCEEDED); }), 0);
}

TEST_F(RunListingTest, ReplicatesGroupIntoConfigurationsWithTheirStatistics) {
  const int64_t sweep = SubmitReplicated("grouped");
  ListRunsRequest request;
  request.set_sweep_id(sweep);
  request.set_group(xmod::v1::RUN_GROUPING_REPLICATES);
  request.set_sort(xmod::v1::RUN_SORT_K);
  ListRunsResponse all;
  ASSERT_TRUE(List(request, &all).ok());
  ASSERT_EQ(all.groups_size(), 3);
  EXPECT_EQ(all.runs_size(), 0);
  EXPECT_EQ(all.total_size(), 3);
  const xmod::v1::RunGroup& k2 = all.groups(1);
  EXPECT_EQ(k2.first().spec().model().k(), 2);
  EXPECT_EQ(k2.run_ids_size(), 3);
  EXPECT_EQ(k2.name() + "-s11", k2.first().name());
  EXPECT_EQ(k2.run_counts().at("QUEUED"), 3);
  EXPECT_NE(all.groups(0).key(), k2.key());

  // Val losses 3, 4 (and one run without any yet); live Δ on one run.
  Write(absl::StrCat("UPDATE runs SET val_loss = 3 WHERE id = ", k2.run_ids(0)));
  Write(absl::StrCat("UPDATE runs SET val_loss = 4 WHERE id = ", k2.run_ids(1)));
  Write(
      absl::StrCat("INSERT INTO live_delta (run_id, flops, delta, sparse_loss, dense_loss) "
                   "VALUES (",
                   k2.run_ids(1), ", 1e9, -0.25, 4, 4.25)"));
  ASSERT_TRUE(List(request, &all).ok());
  const xmod::v1::RunGroup& stats = all.groups(1);
  EXPECT_EQ(stats.val_loss().n(), 2);
  EXPECT_DOUBLE_EQ(stats.val_loss().mean(), 3.5);
  EXPECT_DOUBLE_EQ(stats.val_loss().sd(), std::sqrt(0.5));
  EXPECT_EQ(stats.live_delta().n(), 1);
  EXPECT_DOUBLE_EQ(stats.live_delta().mean(), -0.25);
  EXPECT_DOUBLE_EQ(stats.live_delta().sd(), 0);

  // Pages of groups: one at a time, in the same order.
  request.set_page_size(1);
  std::vector<std::string> keys;
  for (int page = 0; page < 5; ++page) {
    ListRunsResponse response;
    ASSERT_TRUE(List(request, &response).ok());
    ASSERT_EQ(response.groups_size(), 1);
    keys.push_back(response.groups(0).key());
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  EXPECT_THAT(keys, ElementsAre(all.groups(0).key(), all.groups(1).key(), all.groups(2).key()));
}

TEST_F(RunListingTest, RefusalsNameTheField) {
  const int64_t sweep = SubmitReplicated("refused");
  ListRunsRequest request;
  request.set_sweep_id(sweep);
  request.set_page_size(2);
  ListRunsResponse first;
  ASSERT_TRUE(List(request, &first).ok());
  ASSERT_FALSE(first.next_page_token().empty());
  const auto refusal = [&](const ListRunsRequest& r) {
    ListRunsResponse response;
    grpc::Status status = List(r, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    return status.error_message();
  };
  ListRunsRequest bad = request;
  bad.set_page_token("not a token!");
  EXPECT_THAT(refusal(bad), HasSubstr("page_token: malformed"));
  bad.set_page_token(first.next_page_token().substr(0, 5));
  EXPECT_THAT(refusal(bad), HasSubstr("page_token: malformed"));
  bad = request;
  bad.set_page_token(first.next_page_token());
  bad.mutable_filters()->add_ks(4);
  EXPECT_THAT(refusal(bad), HasSubstr("page_token: from another query"));
  bad = request;
  bad.set_page_token(first.next_page_token());
  bad.set_sort(xmod::v1::RUN_SORT_NAME);  // a text key: the token's number cannot be one
  EXPECT_THAT(refusal(bad), HasSubstr("page_token: "));
  bad = request;
  bad.set_page_size(1001);
  EXPECT_EQ(refusal(bad), "page_size: 1001 exceeds the limit 1000");
  bad = request;
  bad.set_sort(static_cast<xmod::v1::RunSortKey>(99));
  EXPECT_EQ(refusal(bad), "sort: unknown sort key 99");
  bad = request;
  bad.mutable_filters()->set_name_contains(std::string(300, 'x'));
  EXPECT_THAT(refusal(bad), HasSubstr("filters.name_contains: 300 exceeds the limit 256"));
  // The same page size or another one continues the same query.
  ListRunsRequest next = request;
  next.set_page_size(100);
  next.set_page_token(first.next_page_token());
  ListRunsResponse rest;
  ASSERT_TRUE(List(next, &rest).ok());
  EXPECT_EQ(rest.runs_size(), 7);
}

TEST_F(RunListingTest, HttpRouteTakesTheSameQueryAsParameters) {
  const int64_t sweep = SubmitReplicated("http");
  httplib::Client http("127.0.0.1", loopback_.coordinator->ports().http);
  const auto get = [&](const std::string& query) {
    auto res = http.Get(absl::StrCat("/api/sweeps/", sweep, "/runs?", query).c_str());
    EXPECT_TRUE(res);
    return res ? std::make_pair(res->status, res->body) : std::make_pair(0, std::string());
  };
  auto [status, body] = get("arch=xmod&k=4&sort=name&order=desc&page_size=2");
  EXPECT_EQ(status, 200) << body;
  EXPECT_THAT(body, HasSubstr("\"total_size\":3"));
  EXPECT_THAT(body, HasSubstr("xmod-tiny-test-L64-K4-A1-s13"));
  EXPECT_THAT(body, ::testing::Not(HasSubstr("-s11")));
  std::tie(status, body) = get("group=replicates&name=-K2-");
  EXPECT_EQ(status, 200) << body;
  EXPECT_THAT(body, HasSubstr("\"name\":\"xmod-tiny-test-L64-K2-A1\""));
  std::tie(status, body) = get("state=bogus");
  EXPECT_EQ(status, 400);
  EXPECT_THAT(body, HasSubstr("state[0]: unknown run state"));
  std::tie(status, body) = get("sort=flavour");
  EXPECT_EQ(status, 400);
  EXPECT_THAT(body, HasSubstr("sort: unknown sort key"));
  std::tie(status, body) = get("page_token=xyz");
  EXPECT_EQ(status, 400);
  EXPECT_THAT(body, HasSubstr("page_token: malformed"));
}

// The events stream: a greeting, then only the runs that changed, as WatchSweepEvent JSON.
TEST_F(RunListingTest, EventsStreamSendsTheRunsThatChanged) {
  const int64_t sweep = SubmitReplicated("events");
  ListRunsRequest request;
  request.set_sweep_id(sweep);
  ListRunsResponse runs;
  ASSERT_TRUE(List(request, &runs).ok());
  const int64_t cancelled = runs.runs(4).id();

  httplib::Client http("127.0.0.1", loopback_.coordinator->ports().http);
  absl::Mutex mu;
  std::string received;
  int status = 0;
  std::thread reader([&] {
    auto res = http.Get(absl::StrCat("/api/sweeps/", sweep, "/events").c_str(),
                        [&](const char* data, size_t size) {
                          absl::MutexLock lock(&mu);
                          received.append(data, size);
                          return true;
                        });
    absl::MutexLock lock(&mu);
    status = res ? res->status : -1;
  });
  const auto holds = [&](const std::string& text) {
    return PollUntil(
        [&] {
          absl::MutexLock lock(&mu);
          return received.find(text) != std::string::npos;
        },
        absl::Seconds(30), absl::Milliseconds(20));
  };
  EXPECT_TRUE(holds("event: hello\ndata: {\"runs\":[],\"sweep\":{"));
  grpc::ClientContext context;
  xmod::v1::CancelRunRequest cancel;
  cancel.set_run_id(cancelled);
  xmod::v1::Run run;
  ASSERT_TRUE(loopback_.user->CancelRun(&context, cancel, &run).ok());
  EXPECT_TRUE(holds("event: runs\n"));
  EXPECT_TRUE(holds("\"state\":\"CANCELLED\""));
  {
    absl::MutexLock lock(&mu);
    const std::string event = received.substr(received.find("event: runs"));
    EXPECT_THAT(event, HasSubstr(absl::StrCat("\"id\":\"", cancelled, "\"")));
    // Only the changed run: no other run's name is in it.
    EXPECT_EQ(event.find(runs.runs(0).name()), std::string::npos) << event;
  }
  http.stop();
  reader.join();

  // An unknown sweep is refused before any stream opens.
  auto res = http.Get("/api/sweeps/999/events");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

// With credentials the stream is refused without one (as every /api/ route), and past
// kMaxEventStreams open streams the next is 429.
TEST(RunEventsLimitsTest, StreamsNeedACredentialAndAreCapped) {
  constexpr char kUser[] = "user-secret-0123456789abcdef";
  constexpr char kReader[] = "read-secret-0123456789abcdef";
  const std::string dir = NewTestDir("run_events_limits");
  absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(
      LoopbackOptions(dir), absl::StrCat("user alice ", kUser, "\nread viewer ", kReader));
  ASSERT_TRUE(c.ok()) << c.status();
  xmod::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = TinySweep(dir);
  xmod::v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(c->user->SubmitSweep(BearerContext(kUser).get(), submit, &submitted).ok());
  const std::string path = absl::StrCat("/api/sweeps/", submitted.sweep_id(), "/events");
  const int port = c->coordinator->ports().http;

  httplib::Client anonymous("127.0.0.1", port);
  auto refused = anonymous.Get(path.c_str());
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);

  const httplib::Headers reader = {{"Authorization", absl::StrCat("Bearer ", kReader)}};
  std::vector<std::unique_ptr<httplib::Client>> clients;
  std::vector<std::thread> streams;
  std::atomic<int> greeted{0};
  for (int i = 0; i < kMaxEventStreams; ++i) {
    clients.push_back(std::make_unique<httplib::Client>("127.0.0.1", port));
    streams.emplace_back([&, client = clients.back().get()] {
      bool counted = false;
      client->Get(path.c_str(), reader, [&](const char* data, size_t size) {
        if (!counted && std::string(data, size).find("event: hello") != std::string::npos) {
          counted = true;
          ++greeted;
        }
        return true;
      });
    });
  }
  EXPECT_TRUE(PollUntil([&] { return greeted.load() == kMaxEventStreams; }, absl::Seconds(30)));
  httplib::Client one_more("127.0.0.1", port);
  auto capped = one_more.Get(path.c_str(), reader);
  ASSERT_TRUE(capped);
  EXPECT_EQ(capped->status, 429);
  EXPECT_THAT(capped->body, HasSubstr("events: at most 16 event streams"));
  for (auto& client : clients) client->stop();
  for (auto& stream : streams) stream.join();
}

}  // namespace
}  // namespace xmod
