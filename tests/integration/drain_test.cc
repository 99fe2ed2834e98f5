// Stops are bounded and lose nothing (docs/fault-tolerance.md, "A stopping worker keeps what
// it could not deliver"): the real xmod-coordinator and xmod-worker on loopback, whose
// trainer is worker/fake_train (one train/loss point every 20 ms until SIGTERM, then a
// checkpoint and exit 75). The coordinator is SIGKILLed while the run trains; the worker,
// sent SIGTERM, must exit within its drain bound and leave the undelivered points, the
// checkpoint report and the PREEMPTED FinishRun in its spill folder. A new worker process on
// the same folder, started while the coordinator is still down, must deliver all of it once
// the coordinator is back: every point of the attempt in the database exactly once, the
// checkpoint recorded, and the attempt ended by its FinishRun (preempted, not lost).
// And a report the coordinator would refuse for good never holds a run up: a point whose name
// is past the coordinator's limit is dropped by the worker, and the run still succeeds.
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/metric_limits.h"
#include "common/poll.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster.h"
#include "tests/integration/test_db.h"
#include "xmod/v1/worker_spill.pb.h"

namespace xmod {
namespace {

constexpr int kDrainTimeoutMs = 2000;

// Submits a one-run sweep for fake_train (which reads neither the data nor the model) and sets
// `run_id` to its run.
void SubmitOneRun(Cluster& cluster, int64_t* run_id) {
  const std::string data = cluster.dir() + "/unused_shard.bin";
  ASSERT_TRUE(WriteFileAtomic(data, "").ok());
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = Cluster::TinyDenseSweep("drain", 1, data);
  v1::SubmitSweepResponse response;
  grpc::ClientContext context;
  grpc::Status submitted = cluster.stub().SubmitSweep(&context, request, &response);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  ASSERT_EQ(response.runs_size(), 1);
  *run_id = response.runs(0).id();
}

bool LogHas(const std::string& path, const std::string& text) {
  absl::StatusOr<std::string> log = ReadFile(path);
  return log.ok() && log->find(text) != std::string::npos;
}

// The seqs of a spill file's records (4-byte little-endian length, 8-byte seq, the point).
std::vector<int64_t> SpillSeqs(const std::string& bytes) {
  std::vector<int64_t> seqs;
  size_t at = 0;
  auto number = [&bytes](size_t from, int width) {
    uint64_t value = 0;
    for (int i = 0; i < width; ++i) {
      value |= uint64_t{static_cast<unsigned char>(bytes[from + i])} << (8 * i);
    }
    return value;
  };
  while (at + 12 <= bytes.size()) {
    seqs.push_back(static_cast<int64_t>(number(at + 4, 8)));
    at += 12 + number(at, 4);
  }
  return seqs;
}

int64_t Count(ReadOnlyDb& db, const std::string& sql) {
  const std::vector<std::vector<std::string>> rows = db.Rows(sql);
  return rows.empty() || rows[0].empty() ? -1 : std::stoll(rows[0][0]);
}

TEST(DrainTest, AStoppedWorkerKeepsWhatItCouldNotDeliverAndItsNextStartDeliversIt) {
  Cluster cluster;
  setenv("XMOD_TRAIN_BIN", XMOD_FAKE_TRAIN, 1);
  setenv("FAKE_TRAIN_MODE", "ok", 1);
  setenv("FAKE_TRAIN_STEPS", "1000000", 1);  // trains until stopped
  setenv("FAKE_TRAIN_STEP_MS", "20", 1);
  const std::vector<std::string> worker_flags = {
      absl::StrCat("--drain_timeout_ms=", kDrainTimeoutMs)};
  ASSERT_TRUE(cluster.StartCoordinator({"--nocheck_data_paths", "--lease_ttl_ms=60000"}).ok())
      << cluster.Logs();
  ASSERT_TRUE(cluster.StartWorker("w1", 1, worker_flags).ok()) << cluster.Logs();
  int64_t run_id = 0;
  ASSERT_NO_FATAL_FAILURE(SubmitOneRun(cluster, &run_id));

  ReadOnlyDb db(cluster.db_path());
  const std::string attempt_points =
      absl::StrCat("SELECT COUNT(*) FROM metrics WHERE run_id = ", run_id, " AND attempt = 1");
  ASSERT_TRUE(PollUntil([&] { return Count(db, attempt_points) > 0; }, absl::Seconds(60),
                        absl::Milliseconds(100)))
      << cluster.Logs();

  // The coordinator goes away while points keep coming.
  cluster.KillCoordinator();
  const std::string worker_log = cluster.dir() + "/w1.log";
  ASSERT_TRUE(PollUntil([&] { return LogHas(worker_log, "ReportMetrics failed, will retry"); },
                        absl::Seconds(60), absl::Milliseconds(100)))
      << cluster.Logs();

  // SIGTERM: the trainer checkpoints and stops, the reports cannot go anywhere, and the
  // worker exits once its drain timeout passed (plus the trainer's stop and one RPC).
  const absl::Time stopped = absl::Now();
  ASSERT_TRUE(cluster.SignalWorker("w1", SIGTERM).ok());
  absl::StatusOr<ExitStatus> exit = cluster.WaitForWorkerExit("w1", absl::Seconds(60));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << cluster.Logs();
  EXPECT_TRUE(exit->success()) << exit->ToString();
  std::cout << "the worker stopped " << absl::ToDoubleSeconds(absl::Now() - stopped)
            << " s after SIGTERM (drain timeout " << kDrainTimeoutMs << " ms)\n";

  // What it kept: the FinishRun, the checkpoint report, and every undelivered point.
  const std::string kept_prefix = absl::StrCat(cluster.dir(), "/w1/spill/run-", run_id, "-a1");
  absl::StatusOr<std::string> outcome_file = ReadFile(kept_prefix + ".outcome");
  ASSERT_TRUE(outcome_file.ok()) << outcome_file.status() << "\n" << cluster.Logs();
  v1::KeptAttempt kept;
  ASSERT_TRUE(kept.ParseFromString(*outcome_file));
  EXPECT_EQ(kept.finish().outcome(), v1::OUTCOME_PREEMPTED);
  EXPECT_EQ(kept.finish().exit_code(), 75);
  const int64_t last_seq = kept.finish().last_seq();
  ASSERT_GT(last_seq, kept.acked_seq());
  ASSERT_EQ(kept.checkpoints_size(), 1);
  const int64_t checkpoint_step = kept.checkpoints(0).request().step();
  absl::StatusOr<std::string> spill_file = ReadFile(kept_prefix + ".spill");
  ASSERT_TRUE(spill_file.ok()) << spill_file.status();
  const std::vector<int64_t> seqs = SpillSeqs(*spill_file);
  ASSERT_EQ(static_cast<int64_t>(seqs.size()), last_seq - kept.acked_seq());
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], kept.acked_seq() + 1 + i);

  // A new worker process on the same folder, while the coordinator is still down, keeps them.
  ASSERT_TRUE(cluster.StartWorker("w1", 1, worker_flags).ok()) << cluster.Logs();
  ASSERT_TRUE(PollUntil([&] { return LogHas(worker_log, "replaying what an earlier run"); },
                        absl::Seconds(60), absl::Milliseconds(100)))
      << cluster.Logs();
  EXPECT_TRUE(ReadFile(kept_prefix + ".outcome").ok());

  // The coordinator comes back: everything arrives, the FinishRun last.
  ASSERT_TRUE(cluster.StartCoordinator({"--nocheck_data_paths", "--lease_ttl_ms=60000"}).ok())
      << cluster.Logs();
  const std::string ended = absl::StrCat("SELECT COUNT(*) FROM attempts WHERE run_id = ", run_id,
                                         " AND attempt = 1 AND outcome = 'preempted'");
  ASSERT_TRUE(
      PollUntil([&] { return Count(db, ended) == 1; }, absl::Seconds(120), absl::Milliseconds(100)))
      << cluster.Logs();
  EXPECT_EQ(Count(db, attempt_points), last_seq) << "no gap";
  EXPECT_EQ(Count(db, absl::StrCat("SELECT MAX(seq) FROM metrics WHERE run_id = ", run_id,
                                   " AND attempt = 1")),
            last_seq);
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(DISTINCT step) FROM metrics WHERE run_id = ",
                                   run_id, " AND attempt = 1")),
            last_seq)
      << "no step twice";
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) FROM checkpoints WHERE run_id = ", run_id,
                                   " AND attempt = 1 AND step = ", checkpoint_step)),
            1);
  EXPECT_TRUE(PollUntil([&] { return !ReadFile(kept_prefix + ".outcome").ok(); }, absl::Seconds(30),
                        absl::Milliseconds(100)));
  EXPECT_FALSE(ReadFile(kept_prefix + ".spill").ok());
  cluster.Stop();
}

// Before the worker enforced the coordinator's metric-name limit, the coordinator refused the
// batch holding such a point with INVALID_ARGUMENT, the worker retried it forever and the run
// stayed RUNNING, its lease renewed by every heartbeat.
TEST(DrainTest, AMetricNameTheCoordinatorWouldRefuseNeverHoldsUpTheRun) {
  Cluster cluster;
  setenv("XMOD_TRAIN_BIN", XMOD_FAKE_TRAIN, 1);
  setenv("FAKE_TRAIN_MODE", "ok", 1);
  setenv("FAKE_TRAIN_STEPS", "5", 1);
  setenv("FAKE_TRAIN_STEP_MS", "0", 1);
  setenv("FAKE_TRAIN_EXTRA_METRIC", std::string(kMaxMetricNameBytes + 1, 'x').c_str(), 1);
  ASSERT_TRUE(cluster.StartCoordinator({"--nocheck_data_paths"}).ok()) << cluster.Logs();
  ASSERT_TRUE(cluster.StartWorker("w1", 1).ok()) << cluster.Logs();
  int64_t run_id = 0;
  ASSERT_NO_FATAL_FAILURE(SubmitOneRun(cluster, &run_id));

  ReadOnlyDb db(cluster.db_path());
  const std::string succeeded =
      absl::StrCat("SELECT COUNT(*) FROM runs WHERE id = ", run_id, " AND state = 'SUCCEEDED'");
  ASSERT_TRUE(PollUntil([&] { return Count(db, succeeded) == 1; }, absl::Seconds(60),
                        absl::Milliseconds(100)))
      << cluster.Logs();
  // Every train/loss point, numbered without the dropped ones.
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) FROM metrics WHERE run_id = ", run_id,
                                   " AND name = 'train/loss'")),
            5);
  EXPECT_EQ(Count(db, absl::StrCat("SELECT MAX(seq) FROM metrics WHERE run_id = ", run_id)), 5);
  EXPECT_TRUE(LogHas(cluster.dir() + "/w1.log", "its name is 257 bytes, at most 256"));
  unsetenv("FAKE_TRAIN_EXTRA_METRIC");
  cluster.Stop();
}

}  // namespace
}  // namespace xmod
