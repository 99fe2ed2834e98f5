// Cross-process integration tests: the real xmod-coordinator, two real
// xmod-workers and their xmod-train children on loopback run tiny sweeps on shards this test
// writes; every assertion is read back from the coordinator's SQLite file, opened read-only.
//   1. A 4-run sweep (Dense, X-MoD K2 and K4, MoD K2) finishes: every run SUCCEEDED, steps
//      and FLOPs of every series strictly increase, train/loss has no gaps, and the final
//      val/loss is below ln(V), the loss of a uniform predictor.
//   2. A worker SIGKILLed mid-run: its lease expires, the run is retried on the other worker
//      from its latest checkpoint and still finishes, with a gap-free canonical curve.
//   3. A 2-rank run (training.ranks = 2) on a worker with two CPU slots: the worker starts
//      two data-parallel xmod-train ranks, the run SUCCEEDS with a curve like a 1-rank
//      run's (strictly increasing steps, no gaps, every planned step), both ranks end with
//      the same parameters, and a 1-rank run of the same spec logs the same train/loss
//      curve (within 0.1%: only the order of floating-point sums differs).
//   3b. A gang: the same 2-rank run with training.ranks_per_worker = 1 spans two 1-slot
//      workers (TCPStore on member 0, Gloo over loopback), SUCCEEDS with a clean curve, and
//      both ranks end with the same parameters.
//   4. A worker frozen (SIGSTOP) past its lease: its trainer stops by itself without writing
//      (fencing), the run is retried elsewhere without using up an attempt, and after SIGCONT
//      the stale attempt is killed; the run SUCCEEDS with a gap-free canonical curve.
//   5. The newest recorded checkpoint corrupted (4 KiB flipped, sidecar deleted) before a
//      retry: the retry verifies the coordinator's digest, falls back to the older checkpoint,
//      the refusal is recorded (event, attempt note) and the run SUCCEEDS.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "model/accounting/accounting.h"
#include "tests/integration/cluster.h"
#include "tests/integration/test_db.h"

namespace xmod {
namespace {

constexpr int kSeqLen = 64;
constexpr int kBatchTokens = 512;  // 8 sequences per optimizer step
constexpr int kLogEvery = 10;      // xmod-train's default train/* interval (steps)

// The tiny-test backbone's vocabulary (paper-free CPU preset of model/accounting).
int VocabSize() {
  v1::BackboneSpec spec;
  spec.set_name("tiny-test");
  absl::StatusOr<Backbone> backbone = ResolveBackbone(spec);
  return backbone.ok() ? backbone->vocab_size : 0;
}

// Training FLOPs of `steps` optimizer steps of the dense tiny-test model.
double DenseBudget(int steps) { return xmod::DenseBudget(steps, kSeqLen, kBatchTokens); }

v1::SweepSpec MakeSweep(const std::string& data_dir, double budget, int checkpoint_every) {
  v1::SweepSpec spec;
  spec.set_name("integration");
  v1::TrainingSpec* training = spec.mutable_training();
  training->set_flop_budget(budget);
  training->set_seq_len(kSeqLen);
  training->set_batch_tokens(kBatchTokens);
  training->set_optimizer("adamw");
  training->set_lr(3e-3);
  training->set_adamw_lr(3e-3);
  training->set_eval_marks(4);
  training->set_eval_tokens(4096);
  training->set_checkpoint_every_steps(checkpoint_every);
  training->set_seed(1);
  spec.mutable_data()->set_train_glob(data_dir + "/train_*.bin");
  spec.mutable_data()->set_val_glob(data_dir + "/val_*.bin");
  return spec;
}

v1::GridSpec* AddGrid(v1::SweepSpec* spec, std::vector<v1::Architecture> archs,
                      std::vector<int> ks) {
  v1::GridSpec* grid = spec->add_grids();
  grid->set_label("it");
  for (v1::Architecture arch : archs) grid->add_archs(arch);
  grid->add_backbones("tiny-test");
  grid->add_seq_lens(kSeqLen);
  for (int k : ks) grid->add_ks(k);
  grid->add_as(1);
  return grid;
}

// The pid of a process started by this test whose argv[0] contains `program` and whose
// arguments include `arg` (from /proc); 0 if none.
pid_t FindPid(const std::string& program, const std::string& arg) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  pid_t found = 0;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    absl::StatusOr<std::string> cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    if (!cmdline.ok()) continue;
    std::vector<std::string> args = absl::StrSplit(*cmdline, '\0');
    if (args.empty() || args[0].find(program) == std::string::npos) continue;
    if (std::find(args.begin(), args.end(), arg) != args.end()) {
      found = pid;
      break;
    }
  }
  closedir(proc);
  return found;
}

// Whether process `pid` has exited (gone, or a zombie its frozen parent has not reaped).
bool Exited(pid_t pid) {
  absl::StatusOr<std::string> stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return true;
  const size_t paren = stat->rfind(')');
  return paren == std::string::npos || paren + 2 >= stat->size() || (*stat)[paren + 2] == 'Z' ||
         (*stat)[paren + 2] == 'X';
}

// Flips `bytes` bytes in the middle of `path`.
void FlipBytes(const std::string& path, int64_t bytes) {
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path));
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const int64_t from = std::max<int64_t>(0, size / 2 - bytes / 2);
  for (int64_t at = from; at < from + bytes && at < size; ++at) {
    char c;
    f.seekg(at);
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5A);
    f.seekp(at);
    f.write(&c, 1);
  }
}

class SweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_dir_ = cluster_.dir() + "/data";
    ASSERT_TRUE(MakeDirs(data_dir_).ok());
    ASSERT_TRUE(WriteLearnableShard(data_dir_ + "/train_000.bin", 400'000, 1).ok());
    ASSERT_TRUE(WriteLearnableShard(data_dir_ + "/val_000.bin", 40'000, 2).ok());
    ASSERT_GT(VocabSize(), 61);
  }

  // Starts the coordinator and two workers and waits until both registered.
  void StartCluster(std::vector<std::string> coordinator_flags) {
    ASSERT_TRUE(cluster_.StartCoordinator(coordinator_flags).ok()) << cluster_.Logs();
    ASSERT_TRUE(cluster_.StartWorker("w1").ok());
    ASSERT_TRUE(cluster_.StartWorker("w2").ok());
    for (int i = 0; i < 600; ++i) {
      auto rows = cluster_.Query("SELECT COUNT(*) FROM workers");
      if (rows.ok() && rows->rows_size() == 1 && rows->rows(0).values(0) == "2") return;
      absl::SleepFor(absl::Milliseconds(100));
    }
    FAIL() << "workers did not register\n" << cluster_.Logs();
  }

  int64_t Submit(const v1::SweepSpec& spec, int expected_runs) {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = spec;
    v1::SubmitSweepResponse response;
    grpc::Status status = cluster_.stub().SubmitSweep(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.runs_size(), expected_runs);
    for (const v1::Run& run : response.runs())
      std::cout << "run " << run.id() << ": " << run.name() << "\n";
    return response.sweep_id();
  }

  // The canonical (step, flops) of one series of a run, by step.
  static std::vector<std::pair<int64_t, double>> Series(ReadOnlyDb& db, const std::string& run,
                                                        const std::string& name) {
    std::vector<std::pair<int64_t, double>> series;
    for (const auto& row :
         db.Rows(absl::StrCat("SELECT step, flops FROM canonical_metrics WHERE run_id = ", run,
                              " AND name = '", name, "' ORDER BY step, attempt"))) {
      series.emplace_back(std::stoll(row[0]), std::stod(row[1]));
    }
    return series;
  }

  // Steps and FLOPs strictly increase in every series; train/loss is logged every kLogEvery
  // steps from the start to the run's last step, with no gap.
  static void ExpectCleanCurves(ReadOnlyDb& db, const std::string& run) {
    for (const auto& row : db.Rows(
             absl::StrCat("SELECT DISTINCT name FROM canonical_metrics WHERE run_id = ", run))) {
      auto series = Series(db, run, row[0]);
      for (size_t i = 1; i < series.size(); ++i) {
        EXPECT_GT(series[i].first, series[i - 1].first) << "run " << run << " " << row[0];
        EXPECT_GT(series[i].second, series[i - 1].second) << "run " << run << " " << row[0];
      }
    }
    auto loss = Series(db, run, "train/loss");
    ASSERT_GE(loss.size(), 3u) << "run " << run;
    EXPECT_LE(loss.front().first, kLogEvery) << "run " << run;
    for (size_t i = 1; i < loss.size(); ++i) {
      EXPECT_LE(loss[i].first - loss[i - 1].first, kLogEvery)
          << "run " << run << ": train/loss gap after step " << loss[i - 1].first;
    }
    auto last = db.Rows(absl::StrCat("SELECT step FROM runs WHERE id = ", run));
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(loss.back().first, std::stoll(last[0][0])) << "run " << run;
  }

  static void ExpectLearned(ReadOnlyDb& db, const std::string& run) {
    auto rows =
        db.Rows(absl::StrCat("SELECT final_val_loss FROM run_summary WHERE run_id = ", run));
    ASSERT_EQ(rows.size(), 1u);
    ASSERT_FALSE(rows[0][0].empty()) << "run " << run << " has no val/loss";
    const double val_loss = std::stod(rows[0][0]);
    std::cout << "run " << run << ": final val/loss " << val_loss
              << " (ln V = " << std::log(VocabSize()) << ")\n";
    EXPECT_LT(val_loss, std::log(static_cast<double>(VocabSize()))) << "run " << run;
  }

  // Waits until `sql` (through the API) returns a row; its first row ("" values on timeout).
  std::vector<std::string> WaitForRow(const std::string& sql, absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (absl::Now() < end) {
      auto rows = cluster_.Query(sql);
      if (rows.ok() && rows->rows_size() > 0) {
        return {rows->rows(0).values().begin(), rows->rows(0).values().end()};
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    ADD_FAILURE() << "timed out waiting for: " << sql << "\n" << cluster_.Logs();
    return {};
  }

  Cluster cluster_;
  std::string data_dir_;
};

TEST_F(SweepTest, FourRunSweepFinishesAndLearns) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({"--lease_ttl_ms=15000", "--heartbeat_interval_ms=500"}));
  v1::SweepSpec spec = MakeSweep(data_dir_, DenseBudget(60), 0);
  AddGrid(&spec, {v1::DENSE, v1::XMOD}, {2, 4});  // Dense (K ignored) + X-MoD K2, K4
  AddGrid(&spec, {v1::MOD}, {2});
  const absl::Time start = absl::Now();
  const int64_t sweep_id = Submit(spec, 4);
  absl::StatusOr<v1::Sweep> sweep = cluster_.WaitForSweep(sweep_id, absl::Seconds(480));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::cout << "4-run sweep took " << seconds << " s\n";
  RecordProperty("sweep_seconds", std::to_string(seconds));
  ASSERT_TRUE(sweep.ok()) << sweep.status() << "\n" << cluster_.Logs();
  EXPECT_EQ(sweep->state(), v1::SWEEP_DONE) << sweep->ShortDebugString() << "\n" << cluster_.Logs();
  cluster_.Stop();

  ReadOnlyDb db(cluster_.db_path());
  auto runs = db.Rows(absl::StrCat("SELECT id, name, state FROM runs WHERE sweep_id = ", sweep_id));
  ASSERT_EQ(runs.size(), 4u);
  for (const auto& run : runs) {
    EXPECT_EQ(run[2], "SUCCEEDED") << run[1];
    auto attempts = db.Rows(absl::StrCat("SELECT outcome FROM attempts WHERE run_id = ", run[0]));
    ASSERT_EQ(attempts.size(), 1u) << run[1];
    EXPECT_EQ(attempts[0][0], "succeeded") << run[1];
    ExpectCleanCurves(db, run[0]);
    ExpectLearned(db, run[0]);
  }
  // Both workers took part.
  auto workers = db.Rows("SELECT DISTINCT worker FROM attempts");
  EXPECT_EQ(workers.size(), 2u);
}

TEST_F(SweepTest, RunOfAKilledWorkerIsRetriedElsewhereAndFinishes) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({"--lease_ttl_ms=2500", "--heartbeat_interval_ms=300"}));
  v1::SweepSpec spec = MakeSweep(data_dir_, DenseBudget(200), 5);
  AddGrid(&spec, {v1::DENSE}, {1});
  const absl::Time start = absl::Now();
  const int64_t sweep_id = Submit(spec, 1);

  // Wait until the first attempt has a durable checkpoint, then kill its worker.
  std::string victim;
  std::string run_id;
  for (int i = 0; i < 1200 && victim.empty(); ++i) {
    auto rows = cluster_.Query(
        "SELECT a.worker, a.run_id FROM attempts a JOIN checkpoints c "
        "ON c.run_id = a.run_id AND c.attempt = a.attempt WHERE a.attempt = 1 LIMIT 1");
    if (rows.ok() && rows->rows_size() == 1) {
      victim = rows->rows(0).values(0);
      run_id = rows->rows(0).values(1);
    } else {
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  ASSERT_FALSE(victim.empty()) << "no checkpoint of attempt 1\n" << cluster_.Logs();
  ASSERT_TRUE(cluster_.KillWorker(victim).ok());
  std::cout << "killed " << victim << " after " << absl::ToDoubleSeconds(absl::Now() - start)
            << " s\n";

  absl::StatusOr<v1::Sweep> sweep = cluster_.WaitForSweep(sweep_id, absl::Seconds(480));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::cout << "run with a killed worker took " << seconds << " s\n";
  RecordProperty("retry_seconds", std::to_string(seconds));
  ASSERT_TRUE(sweep.ok()) << sweep.status() << "\n" << cluster_.Logs();
  EXPECT_EQ(sweep->state(), v1::SWEEP_DONE) << cluster_.Logs();
  cluster_.Stop();

  ReadOnlyDb db(cluster_.db_path());
  auto state = db.Rows(absl::StrCat("SELECT state FROM runs WHERE id = ", run_id));
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0][0], "SUCCEEDED");
  auto attempts = db.Rows(absl::StrCat(
      "SELECT attempt, worker, outcome, resumed_from_step FROM attempts WHERE run_id = ", run_id,
      " ORDER BY attempt"));
  ASSERT_GE(attempts.size(), 2u);
  EXPECT_EQ(attempts.front()[1], victim);
  EXPECT_EQ(attempts.front()[2], "lost");
  const auto& last = attempts.back();
  EXPECT_NE(last[1], victim);
  EXPECT_EQ(last[2], "succeeded");
  EXPECT_GT(std::stoll(last[3]), 0) << "the retry did not resume from a checkpoint";
  ExpectCleanCurves(db, run_id);
  ExpectLearned(db, run_id);
}

TEST_F(SweepTest, TwoRankRunOnOneWorkerFinishesLikeAOneRankRun) {
  ASSERT_TRUE(
      cluster_.StartCoordinator({"--lease_ttl_ms=15000", "--heartbeat_interval_ms=500"}).ok())
      << cluster_.Logs();
  ASSERT_TRUE(cluster_.StartWorker("w1", /*cpu_slots=*/2).ok());
  constexpr int kSteps = 40;
  v1::SweepSpec spec = MakeSweep(data_dir_, DenseBudget(kSteps), 0);
  spec.mutable_training()->set_ranks(2);  // 512 / 64 = 8 windows a step, 4 per rank
  // fp32: only there do two ranks' sums match one process's to rounding (bf16, the "auto"
  // precision on a CPU with native bf16, rounds each rank's smaller products apart).
  spec.mutable_training()->set_precision("fp32");
  AddGrid(&spec, {v1::DENSE}, {1});
  const absl::Time start = absl::Now();
  const int64_t sweep_id = Submit(spec, 1);
  absl::StatusOr<v1::Sweep> sweep = cluster_.WaitForSweep(sweep_id, absl::Seconds(480));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::cout << "2-rank run took " << seconds << " s\n";
  // The same run as one rank, for reference (same seed, same global batch per step).
  spec.mutable_training()->set_ranks(1);
  const int64_t reference_id = Submit(spec, 1);
  absl::StatusOr<v1::Sweep> reference = cluster_.WaitForSweep(reference_id, absl::Seconds(480));
  ASSERT_TRUE(reference.ok()) << reference.status() << "\n" << cluster_.Logs();
  EXPECT_EQ(reference->state(), v1::SWEEP_DONE) << cluster_.Logs();
  RecordProperty("two_rank_seconds", std::to_string(seconds));
  ASSERT_TRUE(sweep.ok()) << sweep.status() << "\n" << cluster_.Logs();
  EXPECT_EQ(sweep->state(), v1::SWEEP_DONE) << sweep->ShortDebugString() << "\n" << cluster_.Logs();
  cluster_.Stop();

  ReadOnlyDb db(cluster_.db_path());
  auto runs = db.Rows(absl::StrCat("SELECT id, state, step FROM runs WHERE sweep_id = ", sweep_id));
  ASSERT_EQ(runs.size(), 1u);
  const std::string run_id = runs[0][0];
  EXPECT_EQ(runs[0][1], "SUCCEEDED");
  // Every planned step (the budget buys kSteps, give or take the floor of a rounding).
  EXPECT_GE(std::stoll(runs[0][2]), kSteps - 1);
  EXPECT_LE(std::stoll(runs[0][2]), kSteps);
  auto attempts =
      db.Rows(absl::StrCat("SELECT outcome, slots FROM attempts WHERE run_id = ", run_id));
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0][0], "succeeded");
  EXPECT_EQ(attempts[0][1], "0,1");
  ExpectCleanCurves(db, run_id);
  ExpectLearned(db, run_id);
  // Its train/loss curve is the 1-rank run's: the same steps, and the same values up to the
  // order of floating-point sums (the gradient is averaged across ranks instead of summed in
  // one process).
  auto reference_runs =
      db.Rows(absl::StrCat("SELECT id FROM runs WHERE sweep_id = ", reference_id));
  ASSERT_EQ(reference_runs.size(), 1u);
  auto losses = [&db](const std::string& run) {
    std::vector<std::pair<int64_t, double>> out;
    for (const auto& row :
         db.Rows(absl::StrCat("SELECT step, value FROM canonical_metrics WHERE run_id = ", run,
                              " AND name = 'train/loss' ORDER BY step"))) {
      out.emplace_back(std::stoll(row[0]), std::stod(row[1]));
    }
    return out;
  };
  const auto two_ranks = losses(run_id);
  const auto one_rank = losses(reference_runs[0][0]);
  ASSERT_EQ(two_ranks.size(), one_rank.size());
  for (size_t i = 0; i < two_ranks.size(); ++i) {
    EXPECT_EQ(two_ranks[i].first, one_rank[i].first);
    EXPECT_NEAR(two_ranks[i].second, one_rank[i].second, 1e-3 * one_rank[i].second)
        << "train/loss at step " << one_rank[i].first;
    std::cout << "step " << one_rank[i].first << ": train/loss " << one_rank[i].second
              << " (1 rank) vs " << two_ranks[i].second << " (2 ranks)\n";
  }

  // Both ranks trained to the end and agree on the final parameters.
  const std::string attempt_dir = absl::StrCat(cluster_.dir(), "/w1/run-", run_id, "-a1");
  std::string digests[2];
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = attempt_dir + (rank == 0 ? "/train.log" : "/train.rank1.log");
    absl::StatusOr<std::string> text = ReadFile(log);
    ASSERT_TRUE(text.ok()) << text.status();
    const std::string marker = absl::StrCat("[rank ", rank, "/2, parameters sha256 ");
    const size_t at = text->find(marker);
    ASSERT_NE(at, std::string::npos) << log << ":\n" << *text;
    digests[rank] = text->substr(at + marker.size(), 64);
  }
  EXPECT_EQ(digests[0], digests[1]);
}

TEST_F(SweepTest, GangAcrossTwoWorkersEndsWithTheSameParametersOnBoth) {
  ASSERT_TRUE(
      cluster_.StartCoordinator({"--lease_ttl_ms=15000", "--heartbeat_interval_ms=500"}).ok())
      << cluster_.Logs();
  ASSERT_TRUE(cluster_.StartWorker("w1").ok());
  ASSERT_TRUE(cluster_.StartWorker("w2").ok());
  constexpr int kSteps = 40;
  v1::SweepSpec spec = MakeSweep(data_dir_, DenseBudget(kSteps), 0);
  spec.mutable_training()->set_ranks(2);
  spec.mutable_training()->set_ranks_per_worker(1);  // one rank on each worker: a gang
  AddGrid(&spec, {v1::DENSE}, {1});
  const int64_t sweep_id = Submit(spec, 1);
  absl::StatusOr<v1::Sweep> sweep = cluster_.WaitForSweep(sweep_id, absl::Seconds(300));
  ASSERT_TRUE(sweep.ok()) << sweep.status() << "\n" << cluster_.Logs();
  EXPECT_EQ(sweep->state(), v1::SWEEP_DONE) << sweep->ShortDebugString() << "\n" << cluster_.Logs();
  cluster_.Stop();

  ReadOnlyDb db(cluster_.db_path());
  auto runs = db.Rows(absl::StrCat("SELECT id, state FROM runs WHERE sweep_id = ", sweep_id));
  ASSERT_EQ(runs.size(), 1u);
  const std::string run_id = runs[0][0];
  EXPECT_EQ(runs[0][1], "SUCCEEDED");
  // One attempt, written once with both members (member 0 first), one slot on each.
  auto attempts =
      db.Rows(absl::StrCat("SELECT outcome, worker, slots FROM attempts WHERE run_id = ", run_id));
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0][0], "succeeded");
  const std::vector<std::string> members = absl::StrSplit(attempts[0][1], ',');
  ASSERT_EQ(members.size(), 2u) << attempts[0][1];
  EXPECT_EQ(std::set<std::string>(members.begin(), members.end()),
            (std::set<std::string>{"w1", "w2"}));
  EXPECT_EQ(attempts[0][2], "0;0");
  ExpectCleanCurves(db, run_id);
  ExpectLearned(db, run_id);
  // Global rank r ran on member r (its only rank, so its log is that worker's train.log);
  // both trained to the end with the same parameters.
  std::string digests[2];
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log =
        absl::StrCat(cluster_.dir(), "/", members[rank], "/run-", run_id, "-a1/train.log");
    absl::StatusOr<std::string> text = ReadFile(log);
    ASSERT_TRUE(text.ok()) << text.status();
    const std::string marker = absl::StrCat("[rank ", rank, "/2, parameters sha256 ");
    const size_t at = text->find(marker);
    ASSERT_NE(at, std::string::npos) << log << ":\n" << *text;
    digests[rank] = text->substr(at + marker.size(), 64);
  }
  EXPECT_EQ(digests[0], digests[1]);
}

// A loopback TCP port nothing listens on now, below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range): no other process's bind(0) or connect can be given it
// while the test runs, as a port from inside the range could be by the tests beside it.
int UnusedLoopbackPortBelowEphemeralRange() {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
  // Start from a pid-dependent offset, so that concurrent test processes try different ports.
  for (int i = 0; i < 4096 && port == 0; ++i) {
    const int candidate = low - 1 - (::getpid() * 7 + i) % std::min(4096, low - 1024);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(candidate));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) port = candidate;
  }
  ::close(fd);
  return port;
}

TEST_F(SweepTest, TwoGangsNeverShareARendezvousAddressAcrossACoordinatorRestart) {
  const std::vector<std::string> coordinator_flags = {"--lease_ttl_ms=15000",
                                                      "--heartbeat_interval_ms=500"};
  ASSERT_TRUE(cluster_.StartCoordinator(coordinator_flags).ok()) << cluster_.Logs();
  // Both workers offer the same single port on 127.0.0.1: one gang's store at a time.
  const int port = UnusedLoopbackPortBelowEphemeralRange();
  ASSERT_GT(port, 0);
  const std::string range = absl::StrCat("--rendezvous_ports=", port, "-", port);
  ASSERT_TRUE(cluster_.StartWorker("w1", 2, {range}).ok());
  ASSERT_TRUE(cluster_.StartWorker("w2", 2, {range}).ok());
  // Long enough that the second gang is seen waiting while the first trains.
  v1::SweepSpec spec = MakeSweep(data_dir_, DenseBudget(600), 0);
  spec.mutable_training()->set_ranks(2);
  spec.mutable_training()->set_ranks_per_worker(1);
  v1::GridSpec* grid = AddGrid(&spec, {v1::DENSE}, {1});
  grid->add_seeds(1);
  grid->add_seeds(2);  // two gangs that could run side by side
  const int64_t sweep_id = Submit(spec, 2);

  // While one gang trains, the other waits for the port and says so.
  const std::vector<std::string> waiting =
      WaitForRow(absl::StrCat("SELECT q.id FROM runs q JOIN runs r ON r.sweep_id = q.sweep_id "
                              "WHERE q.sweep_id = ",
                              sweep_id,
                              " AND q.state = 'QUEUED' "
                              "AND r.state = 'RUNNING' AND r.step > 0"),
                 absl::Seconds(240));
  ASSERT_EQ(waiting.size(), 1u);
  v1::GetRunRequest get;
  get.set_run_id(std::stoll(waiting[0]));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::string reason;
  while (reason.empty() && absl::Now() < deadline) {
    grpc::ClientContext context;
    v1::GetRunResponse run;
    if (cluster_.stub().GetRun(&context, get, &run).ok()) reason = run.pending_reason();
    if (reason.empty()) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_NE(reason.find("waiting for a rendezvous port"), std::string::npos) << reason;

  // A restart forgets nothing: the running gang's address stays held.
  cluster_.KillCoordinator();
  ASSERT_TRUE(cluster_.StartCoordinator(coordinator_flags).ok()) << cluster_.Logs();
  absl::StatusOr<v1::Sweep> sweep = cluster_.WaitForSweep(sweep_id, absl::Seconds(600));
  ASSERT_TRUE(sweep.ok()) << sweep.status() << "\n" << cluster_.Logs();
  EXPECT_EQ(sweep->state(), v1::SWEEP_DONE) << cluster_.Logs();
  cluster_.Stop();

  ReadOnlyDb db(cluster_.db_path());
  EXPECT_EQ(db.Rows(absl::StrCat("SELECT id FROM runs WHERE state = 'SUCCEEDED' AND sweep_id = ",
                                 sweep_id))
                .size(),
            2u);
  // Every attempt had the one address, and no two of them were open at once.
  const auto attempts =
      db.Rows("SELECT rendezvous, started_ms, ended_ms FROM attempts ORDER BY started_ms, run_id");
  ASSERT_GE(attempts.size(), 2u);
  int64_t open_until = 0;  // the latest end of the attempts started before this one
  for (const std::vector<std::string>& attempt : attempts) {
    EXPECT_EQ(attempt[0], absl::StrCat("tcp://127.0.0.1:", port));
    ASSERT_FALSE(attempt[2].empty()) << "attempt still open";
    EXPECT_LE(open_until, std::stoll(attempt[1])) << "two gangs on one address at once";
    open_until = std::max<int64_t>(open_until, std::stoll(attempt[2]));
  }
}

TEST_F(SweepTest, AFrozenWorkerIsFencedAndItsRunStillSucceeds) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({"--lease_ttl_ms=3000", "--heartbeat_interval_ms=300"}));
  // Long enough that the frozen worker's trainer is still training when its lease lapses, 3 s
  // after the freeze, on any machine: 2000 steps take ~25 s here (200 took 2.5 s, and the run
  // could end before the lease did).
  v1::SweepSpec spec = MakeSweep(data_dir_, DenseBudget(2000), 50);
  spec.set_max_attempts(1);  // a lost lease must not use it up
  AddGrid(&spec, {v1::DENSE}, {1});
  const int64_t sweep_id = Submit(spec, 1);

  // Once attempt 1 has a durable checkpoint, freeze its worker (its trainer keeps running).
  const std::vector<std::string> first = WaitForRow(
      "SELECT a.worker, a.run_id FROM attempts a JOIN checkpoints c ON c.run_id = a.run_id "
      "AND c.attempt = a.attempt WHERE a.attempt = 1 LIMIT 1",
      absl::Seconds(240));
  ASSERT_EQ(first.size(), 2u);
  const std::string victim = first[0];
  const std::string run_id = first[1];
  // By its work folder, which is this cluster's own: other tests' clusters (ctest runs them
  // in parallel) have workers of the same name.
  const pid_t pid =
      FindPid("xmod-worker", absl::StrCat("--work_dir=", cluster_.dir(), "/", victim));
  ASSERT_GT(pid, 0) << victim;
  const std::string attempt_dir = absl::StrCat(cluster_.dir(), "/", victim, "/run-", run_id, "-a1");
  const pid_t trainer = FindPid("xmod-train", attempt_dir + "/spec.pb");
  ASSERT_GT(trainer, 0) << attempt_dir;
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  std::cout << "stopped " << victim << " (pid " << pid << ")\n";

  // The lease lapses; the trainer, told nothing more, stops by itself while its worker is
  // still frozen.
  for (int i = 0; i < 600 && !Exited(trainer); ++i) absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(Exited(trainer)) << "the stale trainer kept running";
  // The run moved on to the other worker meanwhile.
  WaitForRow(absl::StrCat("SELECT attempt FROM attempts WHERE run_id = ", run_id,
                          " AND attempt > 1 LIMIT 1"),
             absl::Seconds(120));
  ASSERT_EQ(kill(pid, SIGCONT), 0);

  absl::StatusOr<v1::Sweep> sweep = cluster_.WaitForSweep(sweep_id, absl::Seconds(480));
  ASSERT_TRUE(sweep.ok()) << sweep.status() << "\n" << cluster_.Logs();
  EXPECT_EQ(sweep->state(), v1::SWEEP_DONE) << cluster_.Logs();
  cluster_.Stop();

  ReadOnlyDb db(cluster_.db_path());
  auto state = db.Rows(absl::StrCat("SELECT state, failures FROM runs WHERE id = ", run_id));
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0][0], "SUCCEEDED");
  EXPECT_EQ(state[0][1], "0");  // the lost lease was not counted as a failure
  auto attempts = db.Rows(absl::StrCat(
      "SELECT attempt, worker, outcome, resumed_from_step FROM attempts WHERE run_id = ", run_id,
      " ORDER BY attempt"));
  ASSERT_GE(attempts.size(), 2u);
  EXPECT_EQ(attempts.front()[1], victim);
  EXPECT_EQ(attempts.front()[2], "lost");
  EXPECT_EQ(attempts.back()[2], "succeeded");
  EXPECT_GT(std::stoll(attempts.back()[3]), 0) << "the retry did not resume from a checkpoint";
  // Nothing of the stale attempt was recorded after the retry began (after SIGCONT the worker
  // still held its events): the retry resumed from attempt 1's newest recorded checkpoint.
  auto late = db.Rows(absl::StrCat("SELECT COUNT(*) FROM checkpoints WHERE run_id = ", run_id,
                                   " AND attempt = 1 AND step > ", attempts[1][3]));
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0][0], "0");
  // It said why (its stderr reaches the log once the worker runs again).
  absl::StatusOr<std::string> log = ReadFile(attempt_dir + "/train.log");
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_NE(log->find("lease lapsed"), std::string::npos) << *log;
  ExpectCleanCurves(db, run_id);
  ExpectLearned(db, run_id);
}

TEST_F(SweepTest, ACorruptNewestCheckpointFallsBackToTheOlderOne) {
  // One worker for attempt 1; the one for the retry starts once the checkpoint is corrupt.
  ASSERT_TRUE(
      cluster_.StartCoordinator({"--lease_ttl_ms=3000", "--heartbeat_interval_ms=300"}).ok())
      << cluster_.Logs();
  ASSERT_TRUE(cluster_.StartWorker("w1").ok());
  v1::SweepSpec spec = MakeSweep(data_dir_, DenseBudget(200), 5);
  AddGrid(&spec, {v1::DENSE}, {1});
  const int64_t sweep_id = Submit(spec, 1);

  // Two durable checkpoints of attempt 1, then its worker dies.
  const std::vector<std::string> first = WaitForRow(
      "SELECT a.worker, a.run_id FROM attempts a JOIN checkpoints c ON c.run_id = a.run_id "
      "AND c.attempt = a.attempt WHERE a.attempt = 1 GROUP BY a.run_id HAVING COUNT(*) >= 2",
      absl::Seconds(240));
  ASSERT_EQ(first.size(), 2u);
  const std::string victim = first[0];
  const std::string run_id = first[1];
  ASSERT_TRUE(cluster_.KillWorker(victim).ok());
  // Once its lease has lapsed, attempt 1 is over: the coordinator refuses any report of it
  // still in flight, and no worker is there to start the retry. Corrupt the newest recorded
  // checkpoint now, then start the worker that retries the run.
  ASSERT_EQ(WaitForRow(absl::StrCat("SELECT outcome FROM attempts WHERE run_id = ", run_id,
                                    " AND attempt = 1 AND outcome = 'lost'"),
                       absl::Seconds(120))
                .size(),
            1u);
  auto rows = cluster_.Query(absl::StrCat(
      "SELECT path, step FROM checkpoints WHERE run_id = ", run_id, " ORDER BY step DESC"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_GE(rows->rows_size(), 2);
  const std::string newest = rows->rows(0).values(0);
  const std::string newest_step = rows->rows(0).values(1);
  const std::string older_step = rows->rows(1).values(1);
  FlipBytes(newest, 4096);
  std::filesystem::remove(newest + ".sha256");
  std::cout << "corrupted " << newest << " (step " << newest_step << ")\n";
  ASSERT_TRUE(cluster_.StartWorker("w2").ok());

  absl::StatusOr<v1::Sweep> sweep = cluster_.WaitForSweep(sweep_id, absl::Seconds(480));
  ASSERT_TRUE(sweep.ok()) << sweep.status() << "\n" << cluster_.Logs();
  EXPECT_EQ(sweep->state(), v1::SWEEP_DONE) << cluster_.Logs();
  cluster_.Stop();

  ReadOnlyDb db(cluster_.db_path());
  auto state = db.Rows(absl::StrCat("SELECT state FROM runs WHERE id = ", run_id));
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0][0], "SUCCEEDED");
  // The retry refused the corrupt file (the recorded digest, no sidecar needed) and resumed
  // from the older checkpoint; `run show` lists the note with the attempt.
  auto attempts = db.Rows(absl::StrCat(
      "SELECT attempt, outcome, resumed_from_step, error FROM attempts WHERE run_id = ", run_id,
      " AND attempt > 1 ORDER BY attempt"));
  ASSERT_GE(attempts.size(), 1u);
  EXPECT_EQ(attempts[0][2], older_step);
  EXPECT_NE(attempts[0][3].find("refused at resume"), std::string::npos) << attempts[0][3];
  EXPECT_NE(attempts[0][3].find("checksum mismatch"), std::string::npos) << attempts[0][3];
  EXPECT_EQ(attempts.back()[1], "succeeded");
  auto events = db.Rows(absl::StrCat(
      "SELECT text FROM events WHERE kind = 'checkpoint_rejected' AND run_id = ", run_id));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0][0].find("step " + newest_step), std::string::npos) << events[0][0];
  // The corrupt checkpoint is never offered again.
  auto left = db.Rows(absl::StrCat("SELECT COUNT(*) FROM checkpoints WHERE path = '", newest, "'"));
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0][0], "0");
  ExpectCleanCurves(db, run_id);
  ExpectLearned(db, run_id);
}

}  // namespace
}  // namespace xmod
