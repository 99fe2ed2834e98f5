// What a worker may report, black-box: the coordinator in-process on loopback with
// credentials, and a real gRPC client holding worker w1's own token that registers, acquires
// a run and then sends forged requests for its own attempt. Checkpoints outside the run's
// folder (plain, through "..", /dev/zero, through a symlink, not a regular file, of another
// size) and strings past their limits are INVALID_ARGUMENT naming the field, and store
// nothing; an oversize FinishRun error is cut, never refused.
#include <grpcpp/create_channel.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "coordinator/api/worker_request_limits.h"
#include "coordinator/coordinator.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kUser[] = "alice-secret-0123456789";
constexpr char kWorker[] = "w1-secret-0123456789abcdef";

class WorkerGatewayLimitsTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("limits");
    absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(
        LoopbackOptions(dir_), absl::StrCat("user alice ", kUser, "\nworker w1 ", kWorker, "\n"));
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(c->coordinator);
    user_ = std::move(c->user);
    worker_ = std::move(c->worker);

    xmod::v1::SubmitSweepRequest submit;
    *submit.mutable_spec() = TinySweep(dir_);
    xmod::v1::SubmitSweepResponse submitted;
    ASSERT_TRUE(user_->SubmitSweep(BearerContext(kUser).get(), submit, &submitted).ok());
    xmod::v1::RegisterResponse registered;
    ASSERT_TRUE(
        worker_->Register(BearerContext(kWorker).get(), CpuWorker("w1", 1), &registered).ok());
    worker_id_ = registered.worker_id();
    xmod::v1::AcquireRunRequest acquire;
    acquire.set_worker_id(worker_id_);
    acquire.add_free_slots(0);
    acquire.set_wait_ms(5000);
    xmod::v1::AcquireRunResponse acquired;
    ASSERT_TRUE(worker_->AcquireRun(BearerContext(kWorker).get(), acquire, &acquired).ok());
    ASSERT_TRUE(acquired.has_assignment());
    assignment_ = acquired.assignment();
    run_dir_ = assignment_.spec().checkpoint_dir();
    ASSERT_EQ(run_dir_, absl::StrCat(dir_, "/ckpt/sweep-", submitted.sweep_id(), "/run-",
                                     assignment_.run_id()));
  }

  // A request of type Request for the acquired attempt.
  template <typename Request>
  Request ForAttempt() const {
    Request request;
    request.set_worker_id(worker_id_);
    request.set_run_id(assignment_.run_id());
    request.set_attempt(assignment_.attempt());
    return request;
  }

  // A well-formed report of the acquired attempt: `path`, holding `contents`.
  xmod::v1::ReportCheckpointRequest Report(const std::string& path,
                                           const std::string& contents = "abc") {
    auto report = ForAttempt<xmod::v1::ReportCheckpointRequest>();
    report.set_step(7);
    report.set_path(path);
    report.set_sha256(Sha256Hex(contents));
    report.set_bytes(static_cast<int64_t>(contents.size()));
    return report;
  }

  grpc::Status Send(const xmod::v1::ReportCheckpointRequest& report) {
    xmod::v1::ReportCheckpointResponse response;
    return worker_->ReportCheckpoint(BearerContext(kWorker).get(), report, &response);
  }

  xmod::v1::GetRunResponse Run() {
    xmod::v1::GetRunRequest request;
    request.set_run_id(assignment_.run_id());
    xmod::v1::GetRunResponse run;
    EXPECT_TRUE(user_->GetRun(BearerContext(kUser).get(), request, &run).ok());
    return run;
  }

  std::string dir_;
  std::string run_dir_;
  int64_t worker_id_ = 0;
  xmod::v1::Assignment assignment_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<xmod::v1::Coordinator::Stub> user_;
  std::unique_ptr<xmod::v1::WorkerGateway::Stub> worker_;
};

TEST_F(WorkerGatewayLimitsTest, CheckpointsOutsideTheRunsFolderAreRefusedAndStoreNothing) {
  namespace fs = std::filesystem;
  const std::string outside = dir_ + "/outside.pt";
  ASSERT_TRUE(WriteFileAtomic(outside, "abc").ok());
  const std::string sibling = fs::path(run_dir_).parent_path().string() + "/run-999";
  ASSERT_TRUE(MakeDirs(sibling).ok());
  ASSERT_TRUE(WriteFileAtomic(sibling + "/ckpt.pt", "abc").ok());
  fs::create_symlink(outside, run_dir_ + "/link.pt");
  fs::create_directory_symlink(dir_, run_dir_ + "/escape");
  ASSERT_TRUE(MakeDirs(run_dir_ + "/folder.pt").ok());
  const std::string fifo = run_dir_ + "/fifo.pt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);

  for (const std::string& forged :
       {outside, sibling + "/ckpt.pt", run_dir_ + "/../run-999/ckpt.pt", run_dir_ + "/../x.pt",
        std::string("/dev/zero"), run_dir_ + "/link.pt", run_dir_ + "/escape/outside.pt",
        run_dir_ + "/folder.pt", fifo, run_dir_, std::string("outside.pt")}) {
    grpc::Status status = Send(Report(forged));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << forged;
    EXPECT_THAT(status.error_message(), StartsWith("path: ")) << forged;
    EXPECT_THAT(status.error_message(), HasSubstr(run_dir_)) << forged;
  }
  // Inside, but not the size reported.
  const std::string inside = run_dir_ + "/ckpt-a1-s0000000007.pt";
  ASSERT_TRUE(WriteFileAtomic(inside, "abcd").ok());
  grpc::Status status = Send(Report(inside));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            absl::StrCat("path: ", inside, " has 4 bytes, the report says 3"));
  // Digest and size are required: an empty digest would switch off verification.
  xmod::v1::ReportCheckpointRequest undigested = Report(inside, "abcd");
  undigested.set_sha256("");
  status = Send(undigested);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "sha256: must be 64 lower-case hex digits, got 0 bytes");
  xmod::v1::ReportCheckpointRequest sizeless = Report(inside, "abcd");
  sizeless.set_bytes(0);
  EXPECT_EQ(Send(sizeless).error_message(), "bytes: must be >= 1, got 0");
  xmod::v1::ReportCheckpointRequest long_path = Report(run_dir_ + "/" + std::string(5000, 'a'));
  EXPECT_EQ(Send(long_path).error_message(),
            absl::StrCat("path: ", long_path.path().size(), " bytes, at most 4096"));

  // An attempt that is not current hears so (its worker stops it) before its path is judged.
  xmod::v1::ReportCheckpointRequest stale = Report(outside);
  stale.set_attempt(assignment_.attempt() + 1);
  status = Send(stale);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();

  EXPECT_EQ(Run().checkpoints_size(), 0);
  // Nothing stored means nothing offered: the next attempt would start fresh.
  EXPECT_TRUE(fs::exists(outside));

  // The trainer's own file in the folder is recorded.
  ASSERT_TRUE(Send(Report(inside, "abcd")).ok());
  xmod::v1::GetRunResponse run = Run();
  ASSERT_EQ(run.checkpoints_size(), 1);
  EXPECT_EQ(run.checkpoints(0).path(), inside);
  EXPECT_EQ(run.checkpoints(0).bytes(), 4);
}

TEST_F(WorkerGatewayLimitsTest, WorkerStringsPastTheirLimitsAreRefusedNamingTheLimit) {
  xmod::v1::RegisterResponse registered;
  xmod::v1::RegisterRequest hostname = CpuWorker("w1", 1);
  hostname.set_hostname(std::string(300, 'h'));
  grpc::Status status = worker_->Register(BearerContext(kWorker).get(), hostname, &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "hostname: 300 bytes, at most 255");
  xmod::v1::RegisterRequest version = CpuWorker("w1", 1);
  version.set_version(std::string(1 << 20, 'v'));
  EXPECT_EQ(worker_->Register(BearerContext(kWorker).get(), version, &registered).error_message(),
            "version: 1048576 bytes, at most 256");
  xmod::v1::RegisterRequest slots = CpuWorker("w1", kMaxSlots + 1);
  EXPECT_EQ(worker_->Register(BearerContext(kWorker).get(), slots, &registered).error_message(),
            "slots: 1025 entries, at most 1024");
  xmod::v1::RegisterRequest description = CpuWorker("w1", 1);
  description.mutable_slots(0)->set_description(std::string(257, 'd'));
  EXPECT_EQ(
      worker_->Register(BearerContext(kWorker).get(), description, &registered).error_message(),
      "slots[0].description: 257 bytes, at most 256");

  auto metrics = ForAttempt<xmod::v1::ReportMetricsRequest>();
  metrics.set_first_seq(1);
  metrics.add_points()->set_name("train/loss");
  metrics.add_points()->set_name(std::string(300, 'n'));
  xmod::v1::ReportMetricsResponse ack;
  status = worker_->ReportMetrics(BearerContext(kWorker).get(), metrics, &ack);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "points[1].name: 300 bytes, at most 256");
  metrics.clear_points();
  for (int i = 0; i <= kMaxMetricPoints; ++i) metrics.add_points()->set_name("train/loss");
  EXPECT_EQ(worker_->ReportMetrics(BearerContext(kWorker).get(), metrics, &ack).error_message(),
            "points: 10001 entries, at most 10000");
  xmod::v1::GetMetricsRequest get_metrics;
  get_metrics.set_run_id(assignment_.run_id());
  xmod::v1::GetMetricsResponse series;
  ASSERT_TRUE(user_->GetMetrics(BearerContext(kUser).get(), get_metrics, &series).ok());
  EXPECT_EQ(series.series_size(), 0);

  xmod::v1::ReportCheckpointRequest refusal = Report(run_dir_ + "/x.pt");
  refusal.set_rejected(std::string(5000, 'r'));
  xmod::v1::ReportCheckpointResponse recorded;
  EXPECT_EQ(
      worker_->ReportCheckpoint(BearerContext(kWorker).get(), refusal, &recorded).error_message(),
      "rejected: 5000 bytes, at most 4096");
  xmod::v1::HeartbeatRequest beat;
  beat.set_worker_id(worker_id_);
  for (int i = 0; i <= kMaxSlots; ++i) beat.add_running()->set_run_id(i);
  xmod::v1::HeartbeatResponse orders;
  EXPECT_EQ(worker_->Heartbeat(BearerContext(kWorker).get(), beat, &orders).error_message(),
            "running: 1025 entries, at most 1024");

  // An outcome is never lost to its error text: the text is cut to its last bytes.
  auto finish = ForAttempt<xmod::v1::FinishRunRequest>();
  finish.set_outcome(xmod::v1::OUTCOME_FAILED);
  finish.set_exit_code(1);
  finish.set_error(std::string(100000, 'e') + "the last line");
  xmod::v1::FinishRunResponse finished;
  ASSERT_TRUE(worker_->FinishRun(BearerContext(kWorker).get(), finish, &finished).ok());
  const xmod::v1::GetRunResponse run = Run();
  ASSERT_EQ(run.attempts_size(), 1);
  EXPECT_EQ(run.attempts(0).outcome(), "failed");
  EXPECT_THAT(run.attempts(0).error(), StartsWith("(cut) eee"));
  EXPECT_THAT(run.attempts(0).error(), ::testing::EndsWith("the last line"));
  EXPECT_EQ(run.attempts(0).error().size(), kMaxErrorBytes + 6);
}

}  // namespace
}  // namespace xmod
