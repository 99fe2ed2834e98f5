// A configuration two member sweeps of a study list is trained once (coordinator/fitting/
// study_sharing.h): creating the study through the gRPC API keeps the run further along (the
// earlier member's when neither started), cancels its twin with the reason "linked to run N of
// sweep S" and links it, and the study's fit reads the kept run in both members' places.
#include "coordinator/fitting/study_sharing.h"

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "common/files.h"
#include "coordinator/coordinator.h"
#include "coordinator/store/store_writes.h"
#include "coordinator/tests/test_util.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod {
namespace {

// "K2A1" for the X-MoD run at K = 2, A = 1; "DENSE" for the dense one.
std::string Configuration(const xmod::v1::Run& run) {
  const xmod::v1::ModelSpec& model = run.spec().model();
  if (model.arch() != xmod::v1::XMOD) return xmod::v1::Architecture_Name(model.arch());
  return absl::StrCat("K", model.k(), "A", model.a());
}

// The runs of `sweep_id`, by id.
std::vector<xmod::v1::Run> ListedRuns(xmod::v1::Coordinator::Stub& user, int64_t sweep_id) {
  xmod::v1::ListRunsRequest request;
  request.set_sweep_id(sweep_id);
  xmod::v1::ListRunsResponse response;
  grpc::Status status = user.ListRuns(BearerContext("").get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return {response.runs().begin(), response.runs().end()};
}

// TinySweep as study member b: X-MoD only, K = 2 and 4 at A = 1 (TinySweep's, the same
// budget and seed) and A = 2.
xmod::v1::SweepSpec SweepB(const std::string& dir) {
  xmod::v1::SweepSpec spec = TinySweep(dir);
  spec.set_name("tiny-b");
  xmod::v1::GridSpec* grid = spec.mutable_grids(0);
  grid->clear_archs();
  grid->add_archs(xmod::v1::XMOD);
  grid->clear_ks();
  grid->add_ks(2);
  grid->add_ks(4);
  grid->add_as(2);
  return spec;
}

// The runs of `sweep_id` (one L and backbone) by configuration.
std::map<std::string, xmod::v1::Run> RunsOf(xmod::v1::Coordinator::Stub& user, int64_t sweep_id) {
  std::map<std::string, xmod::v1::Run> out;
  for (const xmod::v1::Run& run : ListedRuns(user, sweep_id)) out[Configuration(run)] = run;
  return out;
}

TEST(StudySharingTest, CreatingAStudyTrainsEachSharedConfigurationOnce) {
  const std::string dir = NewTestDir("sharing");
  absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(LoopbackOptions(dir));
  ASSERT_TRUE(c.ok()) << c.status();
  xmod::v1::Coordinator::Stub& user = *c->user;
  // Sweep a: DENSE, K2A1, K4A1. Sweep b: K2A1, K4A1 (a's, same budget and seed), K2A2, K4A2.
  xmod::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = TinySweep(dir);
  xmod::v1::SubmitSweepResponse a;
  ASSERT_TRUE(user.SubmitSweep(BearerContext("").get(), submit, &a).ok());
  *submit.mutable_spec() = SweepB(dir);
  xmod::v1::SubmitSweepResponse b;
  grpc::Status status = user.SubmitSweep(BearerContext("").get(), submit, &b);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(b.runs_size(), 4);

  xmod::v1::CreateStudyRequest create;
  create.mutable_spec()->set_name("shared");
  create.mutable_spec()->add_members()->set_sweep_id(a.sweep_id());
  create.mutable_spec()->mutable_members(0)->set_role("kxl");
  create.mutable_spec()->add_members()->set_sweep_id(b.sweep_id());
  create.mutable_spec()->mutable_members(1)->set_role("axk");
  xmod::v1::Study study;
  status = user.CreateStudy(BearerContext("").get(), create, &study);
  ASSERT_TRUE(status.ok()) << status.error_message();

  std::map<std::string, xmod::v1::Run> runs_a = RunsOf(user, a.sweep_id());
  std::map<std::string, xmod::v1::Run> runs_b = RunsOf(user, b.sweep_id());
  for (const auto& [configuration, run] : runs_a) {
    EXPECT_EQ(run.state(), xmod::v1::QUEUED) << configuration;  // the earlier member trains
  }
  EXPECT_EQ(runs_b.at("K2A1").state(), xmod::v1::CANCELLED);
  EXPECT_EQ(runs_b.at("K4A1").state(), xmod::v1::CANCELLED);
  EXPECT_EQ(runs_b.at("K2A2").state(), xmod::v1::QUEUED);
  EXPECT_EQ(runs_b.at("K4A2").state(), xmod::v1::QUEUED);

  std::vector<SharedRunRow> links;
  ASSERT_TRUE(c->coordinator->store()
                  ->Read([&](Db& db) {
                    absl::StatusOr<std::vector<SharedRunRow>> l =
                        LoadSharedRuns(db, {a.sweep_id(), b.sweep_id()});
                    if (l.ok()) links = *std::move(l);
                    return l.status();
                  })
                  .ok());
  ASSERT_EQ(links.size(), 2u);
  std::map<int64_t, int64_t> trained_of;  // untrained run -> trained run
  for (const SharedRunRow& link : links) {
    EXPECT_EQ(link.sweep_id, b.sweep_id());
    EXPECT_EQ(link.study_id, study.id());
    trained_of[link.run_id] = link.trained_run_id;
  }
  EXPECT_EQ(trained_of[runs_b.at("K2A1").id()], runs_a.at("K2A1").id());
  EXPECT_EQ(trained_of[runs_b.at("K4A1").id()], runs_a.at("K4A1").id());

  // Once the earlier member's run succeeds, the later sweep's own fit reads it in place of
  // its cancelled copy (LoadRunsTrainedElsewhere); the not yet succeeded one is not read.
  const int64_t trained = runs_a.at("K2A1").id();
  ASSERT_TRUE(c->coordinator->store()
                  ->WriteAndWait([&](Db& db) {
                    xmod::v1::MetricPoint point;
                    point.set_step(1);
                    point.set_flops(1e9);
                    point.set_name("val/loss");
                    point.set_value(3.5);
                    if (absl::Status m = InsertMetrics(db, trained, 1, 0, {point}); !m.ok()) {
                      return m;
                    }
                    RunUpdate update;
                    update.run_id = trained;
                    update.state = xmod::v1::SUCCEEDED;
                    update.finished_ms = 2000;
                    return UpdateRun(db, update);
                  })
                  .ok());
  std::vector<fitter::RunCurve> elsewhere;
  ASSERT_TRUE(c->coordinator->store()
                  ->Read([&](Db& db) {
                    absl::StatusOr<std::vector<fitter::RunCurve>> r =
                        LoadRunsTrainedElsewhere(db, b.sweep_id());
                    if (r.ok()) elsewhere = *std::move(r);
                    return r.status();
                  })
                  .ok());
  ASSERT_EQ(elsewhere.size(), 1u);
  EXPECT_EQ(elsewhere[0].run_id, trained);

  // A second study over the same sweeps links nothing again; the links stand.
  create.mutable_spec()->set_name("shared-2");
  status = user.CreateStudy(BearerContext("").get(), create, &study);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(RunsOf(user, b.sweep_id()).at("K2A2").state(), xmod::v1::QUEUED);
}

// A twin already training when the study is created: the run further along is kept whichever
// member it belongs to, and the other is cancelled saying which run it is linked to — in its
// run (error), and in the event log with the study's creator as actor.
TEST(StudySharingTest, TheTwinFurtherAlongIsKeptAndTheOtherSaysWhy) {
  const std::string dir = NewTestDir("started");
  absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(LoopbackOptions(dir));
  ASSERT_TRUE(c.ok()) << c.status();
  xmod::v1::Coordinator::Stub& user = *c->user;
  // Sweep b (K2A1, K4A1, K2A2, K4A2) is submitted first; a worker starts its K2A1 run and
  // reports training FLOPs. Sweep a (DENSE, K2A1, K4A1) is queued after it.
  xmod::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = SweepB(dir);
  xmod::v1::SubmitSweepResponse b;
  ASSERT_TRUE(user.SubmitSweep(BearerContext("").get(), submit, &b).ok());
  xmod::v1::RegisterResponse registered;
  ASSERT_TRUE(c->worker->Register(BearerContext("").get(), CpuWorker("w1", 1), &registered).ok());
  xmod::v1::AcquireRunRequest acquire;
  acquire.set_worker_id(registered.worker_id());
  acquire.add_free_slots(0);
  xmod::v1::AcquireRunResponse leased;
  ASSERT_TRUE(c->worker->AcquireRun(BearerContext("").get(), acquire, &leased).ok());
  ASSERT_TRUE(leased.has_assignment());
  const int64_t started = leased.assignment().run_id();
  ASSERT_EQ(started, RunsOf(user, b.sweep_id()).at("K2A1").id());  // FIFO: b's first run
  xmod::v1::ReportMetricsRequest report;
  report.set_worker_id(registered.worker_id());
  report.set_run_id(started);
  report.set_attempt(leased.assignment().attempt());
  report.set_first_seq(1);
  xmod::v1::MetricPoint* point = report.add_points();
  point->set_step(5);
  point->set_tokens(640);
  point->set_flops(2e9);
  point->set_name("train/loss");
  point->set_value(4.2);
  xmod::v1::ReportMetricsResponse acked;
  ASSERT_TRUE(c->worker->ReportMetrics(BearerContext("").get(), report, &acked).ok());
  *submit.mutable_spec() = TinySweep(dir);
  xmod::v1::SubmitSweepResponse a;
  ASSERT_TRUE(user.SubmitSweep(BearerContext("").get(), submit, &a).ok());

  // The study lists a first: its K2A1 run is behind b's and gives way; its K4A1 run (neither
  // started) is kept and b's is cancelled, as before.
  xmod::v1::CreateStudyRequest create;
  create.mutable_spec()->set_name("started");
  create.mutable_spec()->add_members()->set_sweep_id(a.sweep_id());
  create.mutable_spec()->mutable_members(0)->set_role("kxl");
  create.mutable_spec()->add_members()->set_sweep_id(b.sweep_id());
  create.mutable_spec()->mutable_members(1)->set_role("axk");
  xmod::v1::Study study;
  grpc::Status status = user.CreateStudy(BearerContext("").get(), create, &study);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(study.shared_runs(), 2);
  const std::map<std::string, xmod::v1::Run> runs_a = RunsOf(user, a.sweep_id());
  const std::map<std::string, xmod::v1::Run> runs_b = RunsOf(user, b.sweep_id());
  EXPECT_EQ(runs_b.at("K2A1").state(), xmod::v1::RUNNING);
  EXPECT_EQ(runs_a.at("K2A1").state(), xmod::v1::CANCELLED);
  EXPECT_EQ(runs_a.at("K2A1").error(), absl::StrCat("linked to run ", started, " of sweep ",
                                                    b.sweep_id(), " (study started)"));
  EXPECT_EQ(runs_a.at("K4A1").state(), xmod::v1::QUEUED);
  EXPECT_EQ(runs_b.at("K4A1").state(), xmod::v1::CANCELLED);
  EXPECT_EQ(runs_b.at("K4A1").error(),
            absl::StrCat("linked to run ", runs_a.at("K4A1").id(), " of sweep ", a.sweep_id(),
                         " (study started)"));
  // The event log says so, for both.
  xmod::v1::ListEventsRequest events_of;
  events_of.set_run_id(runs_a.at("K2A1").id());
  xmod::v1::ListEventsResponse events;
  ASSERT_TRUE(user.ListEvents(BearerContext("").get(), events_of, &events).ok());
  ASSERT_EQ(events.events_size(), 2);  // newest first
  EXPECT_EQ(events.events(0).kind(), "run_cancelled");
  EXPECT_EQ(events.events(1).kind(), "run_linked");
  EXPECT_EQ(events.events(1).text(), runs_a.at("K2A1").error());
  EXPECT_EQ(events.events(1).actor(), "");  // the anonymous caller
}

// The bundled B.4 study (examples/paper/b4_study.textpb) over its three submitted sweeps:
// a dry run counts the paper's 109 in-range observations of the 124 its sweeps list and the
// 17 runs an earlier member trains, storing and cancelling nothing; creating it cancels them.
TEST(StudySharingTest, TheBundledB4StudysDryRunCounts109) {
  const char* source = std::getenv("XMOD_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "run through ctest (XMOD_SOURCE_DIR)";
  const std::string dir = NewTestDir("b4");
  absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(LoopbackOptions(dir));
  ASSERT_TRUE(c.ok()) << c.status();
  xmod::v1::Coordinator::Stub& user = *c->user;
  std::vector<int64_t> sweeps;
  for (const char* role : {"kxl", "nact", "axk"}) {
    absl::StatusOr<std::string> text =
        ReadFile(absl::StrCat(source, "/examples/paper/b4_", role, ".textpb"));
    ASSERT_TRUE(text.ok()) << text.status();
    xmod::v1::SubmitSweepRequest submit;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, submit.mutable_spec()));
    xmod::v1::SubmitSweepResponse submitted;
    grpc::Status status = user.SubmitSweep(BearerContext("").get(), submit, &submitted);
    ASSERT_TRUE(status.ok()) << role << ": " << status.error_message();
    sweeps.push_back(submitted.sweep_id());
  }
  absl::StatusOr<std::string> text =
      ReadFile(absl::StrCat(source, "/examples/paper/b4_study.textpb"));
  ASSERT_TRUE(text.ok()) << text.status();
  xmod::v1::CreateStudyRequest create;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, create.mutable_spec()));
  create.set_dry_run(true);
  xmod::v1::Study study;
  grpc::Status status = user.CreateStudy(BearerContext("").get(), create, &study);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(study.id(), 0);
  EXPECT_EQ(study.listed_observations(), 56 + 44 + 24);
  EXPECT_EQ(study.in_range_observations(), 109);
  EXPECT_EQ(study.shared_runs(), 17);
  xmod::v1::ListStudiesResponse listed;
  ASSERT_TRUE(user.ListStudies(BearerContext("").get(), {}, &listed).ok());
  EXPECT_EQ(listed.studies_size(), 0);
  const auto cancelled = [&] {
    int n = 0;
    for (int64_t sweep : sweeps) {
      for (const xmod::v1::Run& run : ListedRuns(user, sweep)) {
        n += run.state() == xmod::v1::CANCELLED;
      }
    }
    return n;
  };
  EXPECT_EQ(cancelled(), 0);

  create.set_dry_run(false);
  status = user.CreateStudy(BearerContext("").get(), create, &study);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GT(study.id(), 0);
  EXPECT_EQ(study.in_range_observations(), 109);
  EXPECT_EQ(study.shared_runs(), 17);
  EXPECT_EQ(cancelled(), 17);
}

TEST(StudySharingTest, TheTrainedRunStandsInTheMemberThatSharesIt) {
  fitter::RunCurve trained;
  trained.run_id = 7;
  trained.name = "xmod-K2";
  std::vector<std::vector<fitter::RunCurve>> runs = {{trained}, {}, {}};
  // Run 12 of sweep 20 is trained as run 7 (sweep 10); run 13's trained run has not succeeded.
  AddTrainedRuns({{12, 20, 7, 1}, {13, 20, 8, 1}}, {10, 20, 30}, &runs);
  ASSERT_EQ(runs[1].size(), 1u);
  EXPECT_EQ(runs[1][0].run_id, 7);
  EXPECT_EQ(runs[0].size(), 1u);
  EXPECT_TRUE(runs[2].empty());
}

TEST(StudySharingTest, RunIdentityIgnoresWhereAndWhenARunRuns) {
  xmod::v1::RunSpec spec;
  spec.mutable_model()->set_k(4);
  spec.mutable_training()->set_flop_budget(3e19);
  spec.mutable_training()->set_seed(1);
  xmod::v1::RunSpec other = spec;
  other.set_run_id(99);
  other.set_attempt(2);
  other.set_checkpoint_dir("/ckpt/run-99");
  EXPECT_EQ(RunIdentity(spec), RunIdentity(other));
  other.mutable_training()->set_flop_budget(5e19);
  EXPECT_NE(RunIdentity(spec), RunIdentity(other));
  other = spec;
  other.mutable_training()->set_seed(2);
  EXPECT_NE(RunIdentity(spec), RunIdentity(other));
}

}  // namespace
}  // namespace xmod
