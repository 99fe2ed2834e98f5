// A cluster shared by a lab (docs/operations.md, "Sharing a cluster"), with real processes:
// xmod-coordinator, three xmod-worker processes of one CPU slot each, and worker/fake_train
// as their trainer (a train/loss point of 5/step every 40 ms; a SIGTERM checkpoints the last
// step and exits 75; FAKE_TRAIN_RESUME=1 continues after the checkpoint it resumes from).
// Two user credentials, alice and bob, submit sweeps; the database is sampled read-only.
//   (a) bob's high-priority sweep preempts alice's low-priority runs filling the cluster:
//       his runs start (the submit-to-start latency is printed, p50 / p99), alice's displaced
//       runs end SUCCEEDED with the fault-free final loss and every step exactly once.
//   (b) quotas alice = 1, bob = 2, both queues deep: never more than the quota while the
//       other user has queued runs (the 1:2 share of the samples is printed).
//   (c) weights 1:1, no quotas, 20 runs each: the slot-seconds each user completed while
//       both had runs queued are within 10% of each other (printed).
//   (d) a coordinator SIGKILLed and restarted once preemptions were ordered to take back
//       borrowed slots keeps them: every run ends SUCCEEDED without gaps, the quota holds,
//       and `GetUsage` after the restart matches the attempts stored.
// No assertion is on timing: states are waited for with deadlines.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/poll.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster.h"
#include "tests/integration/test_db.h"

namespace xmod {
namespace {

constexpr int kSteps = 100;
constexpr char kAlice[] = "alice";
constexpr char kBob[] = "bob";

std::string TokenOf(const std::string& name) { return Cluster::TokenOf(name); }

int64_t Count(ReadOnlyDb& db, const std::string& sql) {
  const std::vector<std::vector<std::string>> rows = db.Rows(sql);
  return rows.empty() || rows[0].empty() || rows[0][0].empty() ? -1 : std::stoll(rows[0][0]);
}

// Nearest-rank percentile of `values` (sorted here).
double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100 * static_cast<double>(values.size())));
  return values[std::max<size_t>(rank, 1) - 1];
}

class SharingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Cluster::UseFakeTrainer(XMOD_FAKE_TRAIN, kSteps, 40);
    std::vector<std::string> credentials = {absl::StrCat("user ", kAlice),
                                            absl::StrCat("user ", kBob)};
    for (const std::string& w : workers_) credentials.push_back("worker " + w);
    ASSERT_TRUE(cluster_.WriteCredentials(credentials).ok());
    data_ = cluster_.dir() + "/unused_shard.bin";
    ASSERT_TRUE(WriteFileAtomic(data_, "").ok());
  }
  void TearDown() override { cluster_.Stop(); }

  std::string TokenFile(const std::string& worker) const { return cluster_.TokenFile(worker); }

  // Starts (or restarts) the coordinator with sharing config `config` (text format).
  void StartCoordinator(const std::string& config) {
    const std::string path = cluster_.dir() + "/sharing.txtpb";
    ASSERT_TRUE(WriteFileAtomic(path, config).ok());
    ASSERT_TRUE(cluster_
                    .StartCoordinator({"--nocheck_data_paths", cluster_.CredentialsFlag(),
                                       "--sharing_config=" + path, "--heartbeat_interval_ms=300",
                                       "--lease_ttl_ms=20000"})
                    .ok())
        << cluster_.Logs();
  }
  void StartWorkers() {
    for (const std::string& w : workers_) {
      ASSERT_TRUE(cluster_.StartWorker(w, 1, {"--token_file=" + TokenFile(w)}).ok())
          << cluster_.Logs();
    }
  }

  // Submits `runs` runs (replicates of one tiny run) as `user`; returns the sweep id.
  int64_t Submit(const std::string& user, const std::string& name, int priority, int runs) {
    v1::SweepSpec spec = Cluster::TinyDenseSweep(name, runs, data_);
    spec.set_priority(priority);
    const v1::SubmitSweepResponse response = cluster_.SubmitAs(user, spec);
    EXPECT_EQ(response.runs_size(), runs);
    return response.sweep_id();
  }

  // Waits until `attempts` open attempts have reported step `step`.
  void WaitOpenAttemptsAtStep(ReadOnlyDb& db, int attempts, int step) {
    const std::string sql = absl::StrCat(
        "SELECT COUNT(*) FROM metrics m JOIN attempts a USING (run_id, attempt)"
        " WHERE a.ended_ms IS NULL AND m.step = ",
        step);
    ASSERT_TRUE(PollUntil([&] { return Count(db, sql) == attempts; }, absl::Seconds(60),
                          absl::Milliseconds(50)))
        << cluster_.Logs();
  }

  // The attempts table, for failure messages.
  static std::string Attempts(ReadOnlyDb& db) {
    std::string out;
    for (const auto& row :
         db.Rows("SELECT run_id, attempt, outcome, exit_code, resumed_from_step, error,"
                 " preempt_reason FROM attempts ORDER BY run_id, attempt")) {
      absl::StrAppend(&out, absl::StrJoin(row, " | "), "\n");
    }
    return out;
  }

  // Waits until no run is queued or running.
  void WaitAllEnded(ReadOnlyDb& db, absl::Duration timeout) {
    ASSERT_TRUE(PollUntil(
        [&] {
          return Count(db, "SELECT COUNT(*) FROM runs WHERE state IN ('QUEUED', 'RUNNING')") == 0;
        },
        timeout, absl::Milliseconds(100)))
        << cluster_.Logs();
  }

  // Every run SUCCEEDED, with train/loss at every step 1..kSteps exactly once in
  // canonical_metrics and the fault-free final loss; no failure counted.
  void ExpectCompleteRuns(ReadOnlyDb& db) {
    EXPECT_EQ(Count(db, "SELECT COUNT(*) FROM runs WHERE state <> 'SUCCEEDED' OR failures > 0"), 0);
    for (const auto& row : db.Rows("SELECT id FROM runs")) {
      const std::string id = row[0];
      const std::string points =
          absl::StrCat(" FROM canonical_metrics WHERE run_id = ", id, " AND name = 'train/loss'");
      EXPECT_EQ(Count(db, "SELECT COUNT(*)" + points), kSteps) << "run " << id;
      EXPECT_EQ(Count(db, "SELECT COUNT(DISTINCT step)" + points), kSteps) << "run " << id;
      EXPECT_EQ(Count(db, "SELECT MIN(step)" + points), 1) << "run " << id;
      const std::vector<ReadOnlyDb::Row> last =
          db.Values("SELECT value" + points + " ORDER BY step DESC LIMIT 1");
      ASSERT_EQ(last.size(), 1u) << "run " << id;
      EXPECT_EQ(last[0].number[0], 5.0 / kSteps) << "run " << id;  // as a fault-free pass
    }
  }

  // Open attempts' slots per user, and queued runs per user.
  std::map<std::string, std::pair<int64_t, int64_t>> Sample(ReadOnlyDb& db) {
    std::map<std::string, std::pair<int64_t, int64_t>> by_user;
    for (const auto& row :
         db.Rows("SELECT s.submitter,"
                 " (SELECT COUNT(*) FROM attempts a JOIN runs r ON r.id = a.run_id"
                 "  WHERE r.sweep_id IN (SELECT id FROM sweeps WHERE submitter = s.submitter)"
                 "  AND a.ended_ms IS NULL),"
                 " (SELECT COUNT(*) FROM runs r WHERE r.state = 'QUEUED'"
                 "  AND r.sweep_id IN (SELECT id FROM sweeps WHERE submitter = s.submitter))"
                 " FROM sweeps s GROUP BY s.submitter")) {
      by_user[row[0]] = {std::stoll(row[1]), std::stoll(row[2])};
    }
    return by_user;
  }

  const std::vector<std::string> workers_ = {"w1", "w2", "w3"};
  Cluster cluster_;
  std::string data_;
};

TEST_F(SharingTest, AHighPrioritySweepPreemptsAndTheDisplacedRunsFinishWhole) {
  ASSERT_NO_FATAL_FAILURE(StartCoordinator("min_run_ms: 500\n"));
  ASSERT_NO_FATAL_FAILURE(StartWorkers());
  ReadOnlyDb db(cluster_.db_path());
  const int64_t alice_sweep = Submit(kAlice, "alice-low", 0, 3);
  // The cluster is full of alice's runs, each past the hysteresis and with a checkpoint-worthy
  // step behind it.
  ASSERT_NO_FATAL_FAILURE(WaitOpenAttemptsAtStep(db, 3, 15));
  const int64_t bob_sweep = Submit(kBob, "bob-urgent", 10, 3);
  ASSERT_NO_FATAL_FAILURE(WaitAllEnded(db, absl::Seconds(120)));

  // Every bob run started, before alice's runs could have finished on their own.
  std::vector<double> latencies;
  for (const auto& row : db.Values(absl::StrCat(
           "SELECT MIN(a.started_ms) - s.created_ms FROM attempts a JOIN runs r ON r.id = a.run_id"
           " JOIN sweeps s ON s.id = r.sweep_id WHERE s.id = ",
           bob_sweep, " GROUP BY r.id"))) {
    latencies.push_back(row.number[0] / 1000);
  }
  ASSERT_EQ(latencies.size(), 3u);
  std::cout << "high-priority submit to run start (s): " << absl::StrJoin(latencies, ", ")
            << "; p50 " << Percentile(latencies, 50) << ", p99 " << Percentile(latencies, 99)
            << "\n";
  EXPECT_EQ(Count(db, "SELECT COUNT(*) FROM events WHERE kind = 'run_preempt_ordered'"), 3);
  EXPECT_EQ(Count(db, "SELECT COUNT(*) FROM attempts WHERE outcome = 'preempted'"), 3);
  EXPECT_EQ(Count(db,
                  "SELECT COUNT(*) FROM attempts WHERE outcome = 'preempted'"
                  " AND preempt_reason LIKE 'preempted for run % (priority 10, user \"bob\"):%'"),
            3);
  // Each displaced run resumed from the checkpoint its SIGTERM wrote.
  EXPECT_EQ(
      Count(db, "SELECT COUNT(*) FROM attempts WHERE attempt = 2 AND resumed_from_step >= 15"), 3);
  ExpectCompleteRuns(db);

  // What alice reads (ListRuns: the dashboard's rows and `runs list`): each run was preempted
  // once, and says for whom.
  v1::ListRunsRequest list;
  list.set_sweep_id(alice_sweep);
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer " + TokenOf(kAlice));
  v1::ListRunsResponse listed;
  grpc::Status status = cluster_.stub().ListRuns(&context, list, &listed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(listed.runs_size(), 3);
  for (const v1::Run& run : listed.runs()) {
    EXPECT_EQ(run.state(), v1::SUCCEEDED) << run.name();
    EXPECT_EQ(run.preemptions(), 1) << run.name();
    EXPECT_TRUE(absl::StartsWith(run.last_preemption(), "preempted for run "))
        << run.name() << ": " << run.last_preemption();
  }
}

TEST_F(SharingTest, QuotasHoldTheSplitAtEveryMoment) {
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(
      "users { name: \"alice\" cpu_slots: 1 }\nusers { name: \"bob\" cpu_slots: 2 }\n"));
  setenv("FAKE_TRAIN_STEPS", "15", 1);
  Submit(kAlice, "alice-deep", 0, 5);
  Submit(kBob, "bob-deep", 0, 10);
  ASSERT_NO_FATAL_FAILURE(StartWorkers());
  ReadOnlyDb db(cluster_.db_path());
  int samples = 0, exact = 0;
  ASSERT_TRUE(PollUntil(
      [&] {
        std::map<std::string, std::pair<int64_t, int64_t>> s = Sample(db);
        const auto [alice_running, alice_queued] = s[kAlice];
        const auto [bob_running, bob_queued] = s[kBob];
        if (alice_queued > 0 && bob_queued > 0) {
          ++samples;
          EXPECT_LE(alice_running, 1);
          EXPECT_LE(bob_running, 2);
          if (alice_running == 1 && bob_running == 2) ++exact;
        }
        return alice_queued + bob_queued + alice_running + bob_running == 0;
      },
      absl::Seconds(120), absl::Milliseconds(50)))
      << cluster_.Logs();
  ASSERT_GT(samples, 0);
  std::cout << "quotas 1:2, both queues deep: " << samples << " samples, " << exact
            << " exactly 1:2 (" << 100.0 * exact / samples
            << "%), the rest between a run's end and the next start\n";
  EXPECT_EQ(Count(db, "SELECT COUNT(*) FROM events WHERE kind = 'run_preempt_ordered'"), 0);
  setenv("FAKE_TRAIN_STEPS", std::to_string(kSteps).c_str(), 1);
}

TEST_F(SharingTest, EqualWeightsShareTheSlotSecondsEvenly) {
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(""));
  setenv("FAKE_TRAIN_STEPS", "8", 1);
  Submit(kAlice, "alice-many", 0, 20);
  Submit(kBob, "bob-many", 0, 20);
  ASSERT_NO_FATAL_FAILURE(StartWorkers());
  ReadOnlyDb db(cluster_.db_path());
  ASSERT_NO_FATAL_FAILURE(WaitAllEnded(db, absl::Seconds(150)));
  // The contended window: until the first user's last run started (then only one queue).
  const int64_t window_end = Count(
      db,
      "SELECT MIN(last) FROM (SELECT MAX(a.started_ms) AS last FROM attempts a"
      " JOIN runs r ON r.id = a.run_id JOIN sweeps s ON s.id = r.sweep_id GROUP BY s.submitter)");
  std::map<std::string, double> seconds;
  for (const auto& row : db.Values(
           absl::StrCat("SELECT s.submitter, SUM(MAX(0, MIN(a.ended_ms, ", window_end,
                        ") - a.started_ms)) / 1000.0 FROM attempts a JOIN runs r ON r.id = a.run_id"
                        " JOIN sweeps s ON s.id = r.sweep_id WHERE a.outcome = 'succeeded'"
                        " GROUP BY s.submitter"))) {
    seconds[row.text[0]] = row.number[1];
  }
  std::cout << "weights 1:1, completed slot-seconds while both queued: alice " << seconds[kAlice]
            << ", bob " << seconds[kBob] << " (ratio " << seconds[kAlice] / seconds[kBob] << ")\n";
  ASSERT_GT(seconds[kBob], 0);
  EXPECT_NEAR(seconds[kAlice] / seconds[kBob], 1.0, 0.1);
  setenv("FAKE_TRAIN_STEPS", std::to_string(kSteps).c_str(), 1);
}

TEST_F(SharingTest, ARestartKeepsPreemptionsBorrowedSlotsAndUsage) {
  const std::string config =
      "users { name: \"alice\" cpu_slots: 1 }\nusers { name: \"bob\" cpu_slots: 2 }\n"
      "min_run_ms: 500\n";
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(config));
  // Runs of 12 s, so that the ones ordered to stop are still running once the coordinator
  // is back and the workers reconnected (gRPC's reconnect backoff: seconds).
  setenv("FAKE_TRAIN_STEP_MS", "120", 1);
  ASSERT_NO_FATAL_FAILURE(StartWorkers());
  ReadOnlyDb db(cluster_.db_path());
  // Alice borrows the two slots beyond her quota while nobody else queues.
  Submit(kAlice, "alice-borrows", 0, 3);
  ASSERT_NO_FATAL_FAILURE(WaitOpenAttemptsAtStep(db, 3, 10));
  // Bob, within his quota at the same priority, takes them back: the coordinator dies as
  // soon as the orders are stored.
  Submit(kBob, "bob-owner", 0, 2);
  ASSERT_TRUE(PollUntil(
      [&] {
        return Count(db, "SELECT COUNT(*) FROM events WHERE kind = 'run_preempt_ordered'") == 2;
      },
      absl::Seconds(60), absl::Milliseconds(20)))
      << cluster_.Logs();
  cluster_.KillCoordinator();
  const absl::Time restart = absl::Now();
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(config));
  std::cout << "coordinator restarted in " << absl::ToDoubleSeconds(absl::Now() - restart)
            << " s\n";
  int samples = 0;
  ASSERT_TRUE(PollUntil(
      [&] {
        std::map<std::string, std::pair<int64_t, int64_t>> s = Sample(db);
        if (s[kBob].first == 2) {  // bob holds his quota: alice keeps at most hers
          ++samples;
          EXPECT_LE(s[kAlice].first, 1);
        }
        return Count(db, "SELECT COUNT(*) FROM runs WHERE state IN ('QUEUED', 'RUNNING')") == 0;
      },
      absl::Seconds(120), absl::Milliseconds(50)))
      << cluster_.Logs();
  EXPECT_GT(samples, 0) << "bob never held his two slots\n" << cluster_.Logs();
  EXPECT_EQ(Count(db, "SELECT COUNT(*) FROM attempts WHERE outcome = 'preempted'"), 2)
      << Attempts(db) << cluster_.Logs();
  EXPECT_EQ(Count(db, "SELECT COUNT(*) FROM events WHERE kind = 'run_preempt_ordered'"), 2)
      << "no order given twice across the restart";
  ExpectCompleteRuns(db);

  // Usage after the restart, from the database: alice's core-hours are her attempts' time.
  v1::GetUsageRequest request;
  request.set_window_ms(3600 * 1000);
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer " + TokenOf(kBob));
  v1::GetUsageResponse usage;
  grpc::Status status = cluster_.stub().GetUsage(&context, request, &usage);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::map<std::string, v1::UserUsage> by_user;
  for (const v1::UserUsage& u : usage.users()) by_user[u.user()] = u;
  for (const char* user : {kAlice, kBob}) {
    const std::vector<ReadOnlyDb::Row> stored = db.Values(
        absl::StrCat("SELECT SUM(a.ended_ms - a.started_ms) / 3.6e6 FROM attempts a JOIN runs r ON"
                     " r.id = a.run_id JOIN sweeps s ON s.id = r.sweep_id WHERE s.submitter = '",
                     user, "'"));
    ASSERT_EQ(stored.size(), 1u);
    EXPECT_NEAR(by_user[user].core_hours(), stored[0].number[0], 1e-9) << user;
    EXPECT_EQ(by_user[user].cpu_slots_in_use(), 0) << user;
  }
  EXPECT_EQ(by_user[kAlice].cpu_quota(), 1);
  EXPECT_EQ(by_user[kBob].cpu_quota(), 2);
  EXPECT_EQ(by_user[kAlice].gpu_quota(), -1);
}

}  // namespace
}  // namespace xmod
