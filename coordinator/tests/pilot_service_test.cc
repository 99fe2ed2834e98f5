// SelectPilot (the B.3 pilot pick by measured loss) on a real in-process coordinator through
// a gRPC stub: results stored as a worker stores them (WorkerGateway: lease, val/loss point,
// SUCCEEDED), replicate seeds averaged, the run still queued listed as pending, the budget
// and K of every selection; refusals with their codes and field paths; the caller's scope.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/tests/pilot_fixture.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using xmod::v1::PilotConfiguration;
using xmod::v1::SelectPilotResponse;

class PilotServiceTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("pilot");
    absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(LoopbackOptions(dir_));
    ASSERT_TRUE(c.ok()) << c.status();
    c_ = *std::move(c);
  }

  grpc::Status Select(int64_t sweep_id, SelectPilotResponse* response) {
    xmod::v1::SelectPilotRequest request;
    request.set_sweep_id(sweep_id);
    return c_.user->SelectPilot(BearerContext("").get(), request, response);
  }

  xmod::v1::SubmitSweepResponse Submit(const xmod::v1::SweepSpec& spec) {
    xmod::v1::SubmitSweepRequest request;
    *request.mutable_spec() = spec;
    xmod::v1::SubmitSweepResponse submitted;
    EXPECT_TRUE(c_.user->SubmitSweep(BearerContext("").get(), request, &submitted).ok());
    return submitted;
  }

  std::string dir_;
  LoopbackCoordinator c_;
};

TEST_F(PilotServiceTest, RefusesBadIdsUnknownSweepsAndSweepsThatAreNoPilot) {
  SelectPilotResponse response;
  grpc::Status s = Select(0, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), StartsWith("sweep_id: "));
  s = Select(99, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "sweep 99 not found");

  const int64_t pilot = Submit(TinyPilotSweep(dir_)).sweep_id();
  s = Select(pilot, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("has no finished run"));
  EXPECT_THAT(s.error_message(), HasSubstr("6 of 6 configurations queued or running"));

  const int64_t dense_xmod = Submit(TinySweep(dir_)).sweep_id();
  s = Select(dense_xmod, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(),
              HasSubstr(absl::StrCat("sweep ", dense_xmod, " is not a pilot: it has 0 MoE")));
}

TEST_F(PilotServiceTest, SelectsFromStoredResults) {
  const xmod::v1::SubmitSweepResponse submitted = Submit(TinyPilotSweep(dir_));
  ASSERT_EQ(submitted.runs_size(), 10);
  std::map<int64_t, const xmod::v1::Run*> runs;
  for (const xmod::v1::Run& run : submitted.runs()) runs[run.id()] = &run;
  // Every run but the last (an X-MoD replicate) finishes; losses differ per run.
  std::map<int64_t, double> losses;
  absl::StatusOr<std::vector<int64_t>> finished = FinishRunsWithLoss(
      *c_.worker, 9,
      [&](int64_t id) { return losses[id] = 3.0 + 0.013 * static_cast<double>((id * 7) % 11); });
  ASSERT_TRUE(finished.ok()) << finished.status();
  const int64_t last = submitted.runs(9).id();
  ASSERT_EQ(losses.count(last), 0u);

  SelectPilotResponse r;
  grpc::Status s = Select(submitted.sweep_id(), &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r.sweep_id(), submitted.sweep_id());
  ASSERT_EQ(r.configurations_size(), 6);  // 2 MoE, 4 X-MoD (two seeds each)
  ASSERT_EQ(r.selections_size(), 2);
  for (const PilotConfiguration& c : r.configurations()) {
    SCOPED_TRACE(c.label());
    ASSERT_GT(c.run_ids_size(), 0);
    const xmod::v1::Run& first = *runs.at(c.run_ids(0));
    EXPECT_EQ(c.total_params(), first.total_params());
    EXPECT_EQ(c.runs(), c.arch() == xmod::v1::MOE ? 1 : 2);
    double sum = 0;
    for (int64_t id : c.run_ids()) {
      if (id != last) sum += losses.at(id);
    }
    const bool has_last =
        std::find(c.run_ids().begin(), c.run_ids().end(), last) != c.run_ids().end();
    if (has_last) {
      EXPECT_EQ(c.status(), xmod::v1::PILOT_PENDING);
      EXPECT_EQ(c.runs_succeeded(), 1);
    } else {
      EXPECT_EQ(c.status(), xmod::v1::PILOT_MEASURED);
      EXPECT_NEAR(c.val_loss(), sum / c.runs(), 1e-12);  // the replicates' mean
    }
  }
  int picks = 0;
  for (const xmod::v1::PilotSelection& sel : r.selections()) {
    const PilotConfiguration& moe = r.configurations(sel.moe_index());
    SCOPED_TRACE(moe.label());
    EXPECT_EQ(moe.arch(), xmod::v1::MOE);
    EXPECT_EQ(moe.k(), moe.moe() == "2:4+0" ? 2 : 4);
    EXPECT_TRUE(sel.baseline());  // alone in its sparsity group
    for (int i : sel.within_budget()) {
      EXPECT_EQ(r.configurations(i).k(), moe.k());
      EXPECT_LE(r.configurations(i).total_params(), moe.total_params());
    }
    for (int i : sel.over_budget()) {
      EXPECT_EQ(r.configurations(i).k(), moe.k());
      EXPECT_GT(r.configurations(i).total_params(), moe.total_params());
    }
    EXPECT_EQ(sel.within_budget_size() + sel.over_budget_size(), 2);
    if (sel.pick_index() < 0) continue;
    ++picks;
    const PilotConfiguration& pick = r.configurations(sel.pick_index());
    EXPECT_EQ(pick.status(), xmod::v1::PILOT_MEASURED);
    for (int i : sel.within_budget()) {
      if (r.configurations(i).status() == xmod::v1::PILOT_MEASURED) {
        EXPECT_LE(pick.val_loss(), r.configurations(i).val_loss());
      }
    }
  }
  EXPECT_GT(picks, 0);
}

// A read: a read credential may call it, a worker's may not, and nobody unauthenticated.
TEST(PilotServiceScopeTest, ReadCredentialsMayCallIt) {
  const std::string dir = NewTestDir("pilot_scope");
  constexpr char kReader[] = "viewer-secret-0123456789";
  constexpr char kWorker[] = "worker-secret-0123456789";
  absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(
      LoopbackOptions(dir), absl::StrCat("read viewer ", kReader, "\nworker w1 ", kWorker));
  ASSERT_TRUE(c.ok()) << c.status();
  xmod::v1::SelectPilotRequest request;
  request.set_sweep_id(5);
  SelectPilotResponse response;
  EXPECT_EQ(c->user->SelectPilot(BearerContext(kReader).get(), request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(c->user->SelectPilot(BearerContext(kWorker).get(), request, &response).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(c->user->SelectPilot(BearerContext("").get(), request, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace xmod
