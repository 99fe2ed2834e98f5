// Chaos test: a real xmod-coordinator and three real xmod-workers (with
// their xmod-train children) on loopback run a sweep of six tiny runs twice. The first pass
// has no faults and is the reference. During the second, at random points of its progress
// (a seeded RNG; the seed is printed and XMOD_CHAOS_SEED replays it) the test — moving the
// faults it could not land before the runs ended into another faulty sweep of the same runs —
//   - SIGKILLs a worker that is running a run, then starts it again;
//   - SIGKILLs the coordinator and restarts it on the same database and port;
//   - SIGSTOPs a worker that is running a run for twice the lease, then SIGCONTs it (its
//     trainer, in its own process group, keeps running unless it fences itself);
//   - corrupts the newest recorded checkpoint of a running run (4 KiB flipped, sidecar
//     deleted) and SIGKILLs that run's worker, so the retry must resume from it or fall back.
// Then, read from the database: every run of every sweep SUCCEEDED; the canonical metrics
// (resultsdb/schema.cc) of every run have no duplicate step in any series and no gap in
// train/loss; every run's final train/loss and final val/loss equal, bit for bit, those of
// the same run in the fault-free pass (CPU training is deterministic and resumes are exact).
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster.h"
#include "tests/integration/test_db.h"

namespace xmod {
namespace {

constexpr int kSeqLen = 64;
constexpr int kBatchTokens = 512;
constexpr int kLogEvery = 10;  // xmod-train's train/* interval (steps)
constexpr int kSteps = 200;    // of the dense run; the sparse ones take more, cheaper steps
constexpr int kCheckpointEvery = 10;
constexpr int kLeaseTtlMs = 3000;
constexpr int kWorkers = 3;

// Training FLOPs of `steps` optimizer steps of the dense tiny-test model.
double DenseBudget(int steps) { return xmod::DenseBudget(steps, kSeqLen, kBatchTokens); }

v1::SweepSpec ChaosSweep(const std::string& name, const std::string& data_dir, double budget) {
  v1::SweepSpec spec;
  spec.set_name(name);
  v1::TrainingSpec* training = spec.mutable_training();
  training->set_flop_budget(budget);
  training->set_seq_len(kSeqLen);
  training->set_batch_tokens(kBatchTokens);
  training->set_optimizer("adamw");
  training->set_lr(3e-3);
  training->set_adamw_lr(3e-3);
  training->set_eval_marks(2);
  training->set_eval_tokens(2048);
  training->set_checkpoint_every_steps(kCheckpointEvery);
  training->set_seed(7);
  spec.mutable_data()->set_train_glob(data_dir + "/train_*.bin");
  spec.mutable_data()->set_val_glob(data_dir + "/val_*.bin");
  spec.set_max_attempts(10);
  // Dense, X-MoD K in {2, 4} x A in {1, 2}, MoD K = 2: six runs.
  auto add_grid = [&spec](v1::Architecture arch, std::vector<int> ks, std::vector<double> as) {
    v1::GridSpec* grid = spec.add_grids();
    grid->set_label("chaos");
    grid->add_archs(arch);
    grid->add_backbones("tiny-test");
    grid->add_seq_lens(kSeqLen);
    for (int k : ks) grid->add_ks(k);
    for (double a : as) grid->add_as(a);
  };
  add_grid(v1::DENSE, {1}, {1});
  add_grid(v1::XMOD, {2, 4}, {1, 2});
  add_grid(v1::MOD, {2}, {1});
  return spec;
}

enum class Fault { kKillWorker, kKillCoordinator, kStopWorker, kCorruptCheckpoint };

const char* FaultName(Fault fault) {
  switch (fault) {
    case Fault::kKillWorker:
      return "SIGKILL a worker";
    case Fault::kKillCoordinator:
      return "SIGKILL the coordinator";
    case Fault::kStopWorker:
      return "SIGSTOP a worker past its lease";
    case Fault::kCorruptCheckpoint:
      return "corrupt a newest checkpoint";
  }
  return "?";
}

class ChaosTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* seed = std::getenv("XMOD_CHAOS_SEED");
    seed_ = seed != nullptr ? std::strtoull(seed, nullptr, 10) : std::random_device()();
    std::cout << "chaos seed " << seed_ << " (replay with XMOD_CHAOS_SEED=" << seed_ << ")\n";
    rng_.seed(seed_);
    data_dir_ = cluster_.dir() + "/data";
    ASSERT_TRUE(MakeDirs(data_dir_).ok());
    ASSERT_TRUE(WriteLearnableShard(data_dir_ + "/train_000.bin", 400'000, 1).ok());
    ASSERT_TRUE(WriteLearnableShard(data_dir_ + "/val_000.bin", 20'000, 2).ok());
    ASSERT_TRUE(cluster_.StartCoordinator(CoordinatorFlags()).ok()) << cluster_.Logs();
    for (int i = 1; i <= kWorkers; ++i) {
      ASSERT_TRUE(cluster_.StartWorker(absl::StrCat("w", i)).ok());
    }
    for (int i = 0; i < 600; ++i) {
      auto rows = cluster_.Query("SELECT COUNT(*) FROM workers");
      if (rows.ok() && rows->rows_size() == 1 &&
          rows->rows(0).values(0) == std::to_string(kWorkers)) {
        return;
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    FAIL() << "workers did not register\n" << cluster_.Logs();
  }

  static std::vector<std::string> CoordinatorFlags() {
    return {absl::StrCat("--lease_ttl_ms=", kLeaseTtlMs), "--heartbeat_interval_ms=300"};
  }

  double Uniform(double lo, double hi) { return std::uniform_real_distribution<>(lo, hi)(rng_); }
  void Pause(double lo_s, double hi_s) { absl::SleepFor(absl::Seconds(Uniform(lo_s, hi_s))); }

  int64_t Submit(const v1::SweepSpec& spec) {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = spec;
    v1::SubmitSweepResponse response;
    grpc::Status status = cluster_.stub().SubmitSweep(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.runs_size(), 6);
    return response.sweep_id();
  }

  // The steps the runs of `sweep_id` have reached, summed; -1 while the coordinator is down.
  int64_t StepsDone(int64_t sweep_id) {
    auto rows = cluster_.Query(
        absl::StrCat("SELECT COALESCE(SUM(step), 0) FROM runs WHERE sweep_id = ", sweep_id));
    if (!rows.ok() || rows->rows_size() != 1) return -1;
    return std::stoll(rows->rows(0).values(0));
  }

  // Waits until the runs of `sweep_id` have reached `steps` steps in all, or the sweep ended
  // (bounded: 120 s).
  void WaitForSteps(int64_t sweep_id, int64_t steps) {
    for (int i = 0; i < 1200 && SweepActive(sweep_id) && StepsDone(sweep_id) < steps; ++i) {
      absl::SleepFor(absl::Milliseconds(100));
    }
  }

  bool SweepActive(int64_t sweep_id) {
    auto rows =
        cluster_.Query(absl::StrCat("SELECT COUNT(*) FROM runs WHERE sweep_id = ", sweep_id,
                                    " AND state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')"));
    return !rows.ok() || rows->rows_size() != 1 || rows->rows(0).values(0) != "0";
  }

  // A worker running an attempt of `sweep_id` now, with that run and its newest checkpoint
  // if `with_checkpoint` (then only runs with one qualify); empty when there is none.
  struct Target {
    std::string worker, run_id, checkpoint;
  };
  Target FindTarget(int64_t sweep_id, bool with_checkpoint) {
    const std::string sql =
        with_checkpoint ? absl::StrCat(
                              "SELECT a.worker, a.run_id, c.path FROM attempts a JOIN runs r ON "
                              "r.id = a.run_id JOIN checkpoints c ON c.run_id = a.run_id WHERE "
                              "r.sweep_id = ",
                              sweep_id,
                              " AND a.outcome = 'running' AND c.step = "
                              "(SELECT MAX(step) FROM checkpoints WHERE run_id = a.run_id)")
                        : absl::StrCat(
                              "SELECT a.worker, a.run_id, '' FROM attempts a JOIN runs r ON "
                              "r.id = a.run_id WHERE r.sweep_id = ",
                              sweep_id, " AND a.outcome = 'running'");
    auto rows = cluster_.Query(sql);
    if (!rows.ok() || rows->rows_size() == 0) return {};
    const auto& row =
        rows->rows(std::uniform_int_distribution<int>(0, rows->rows_size() - 1)(rng_));
    return {row.values(0), row.values(1), row.values(2)};
  }

  // Waits up to 20 s for a target; empty if the sweep ended first.
  Target WaitForTarget(int64_t sweep_id, bool with_checkpoint) {
    for (int i = 0; i < 200 && SweepActive(sweep_id); ++i) {
      Target target = FindTarget(sweep_id, with_checkpoint);
      if (!target.worker.empty()) return target;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return {};
  }

  void RestartWorker(const std::string& worker) {
    ASSERT_TRUE(cluster_.KillWorker(worker).ok());
    Pause(0.5, 2.0);
    ASSERT_TRUE(cluster_.StartWorker(worker).ok());
  }

  // Injects `fault` into the sweep; false if there was nothing to inject it into (the sweep
  // ended, or no run reached a checkpoint).
  bool Inject(Fault fault, int64_t sweep_id) {
    switch (fault) {
      case Fault::kKillWorker: {
        Target target = WaitForTarget(sweep_id, false);
        if (target.worker.empty()) return false;
        std::cout << "  SIGKILL " << target.worker << " (running run " << target.run_id << ")\n";
        RestartWorker(target.worker);
        return true;
      }
      case Fault::kKillCoordinator: {
        cluster_.KillCoordinator();
        Pause(0.5, 2.0);
        EXPECT_TRUE(cluster_.StartCoordinator(CoordinatorFlags()).ok()) << cluster_.Logs();
        return true;
      }
      case Fault::kStopWorker: {
        Target target = WaitForTarget(sweep_id, false);
        if (target.worker.empty()) return false;
        const double seconds = 2.0 * kLeaseTtlMs / 1000.0 + Uniform(0.5, 2.0);
        std::cout << "  SIGSTOP " << target.worker << " (running run " << target.run_id << ") for "
                  << seconds << " s\n";
        EXPECT_TRUE(cluster_.SignalWorker(target.worker, SIGSTOP).ok());
        absl::SleepFor(absl::Seconds(seconds));
        EXPECT_TRUE(cluster_.SignalWorker(target.worker, SIGCONT).ok());
        return true;
      }
      case Fault::kCorruptCheckpoint: {
        Target target = WaitForTarget(sweep_id, true);
        if (target.worker.empty()) return false;
        std::cout << "  corrupt " << target.checkpoint << " of run " << target.run_id
                  << ", delete its sidecar, SIGKILL " << target.worker << "\n";
        EXPECT_TRUE(Corrupt(target.checkpoint)) << target.checkpoint;
        std::remove((target.checkpoint + ".sha256").c_str());
        RestartWorker(target.worker);
        return true;
      }
    }
    return false;
  }

  // One faulty sweep `name` of the chaos runs: injects the faults of *remaining in order, each at a
  // random point of the training (gaps of 2-8% of the reference's steps, measured in steps,
  // not seconds, so they land while the runs train however fast or loaded the machine is),
  // and leaves in *remaining those it found nothing to inject into (the runs had ended). Waits
  // for the sweep to end; returns its id.
  int64_t InjectFaultsInto(const std::string& name, double budget, int64_t reference_steps,
                           std::vector<Fault>* remaining) {
    const absl::Time start = absl::Now();
    const int64_t sweep_id = Submit(ChaosSweep(name, data_dir_, budget));
    std::vector<Fault> skipped;
    double progress = 0;  // where the next fault lands, as a fraction of the reference's steps
    for (Fault fault : *remaining) {
      progress += Uniform(0.02, 0.08);
      WaitForSteps(sweep_id, static_cast<int64_t>(progress * reference_steps));
      std::cout << absl::StrFormat("sweep %d, t=%.1fs, %.0f%% of the steps: %s\n", sweep_id,
                                   absl::ToDoubleSeconds(absl::Now() - start), 100 * progress,
                                   FaultName(fault));
      if (!SweepActive(sweep_id) || !Inject(fault, sweep_id)) {
        std::cout << "  nothing left to inject it into: it moves to the next faulty sweep\n";
        skipped.push_back(fault);
      }
    }
    absl::StatusOr<v1::Sweep> sweep = cluster_.WaitForSweep(sweep_id, absl::Seconds(150));
    std::cout << "faulty sweep " << sweep_id << ": " << absl::ToDoubleSeconds(absl::Now() - start)
              << " s\n";
    EXPECT_TRUE(sweep.ok()) << sweep.status() << "\n" << cluster_.Logs();
    *remaining = std::move(skipped);
    return sweep_id;
  }

  // Flips 4 KiB in the middle of the file (all of it if smaller), in place.
  static bool Corrupt(const std::string& path) {
    absl::StatusOr<std::string> bytes = ReadFile(path);
    if (!bytes.ok()) return false;
    const size_t n = std::min<size_t>(4096, bytes->size());
    const size_t at = (bytes->size() - n) / 2;
    for (size_t i = at; i < at + n; ++i) (*bytes)[i] = static_cast<char>(~(*bytes)[i]);
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(at));
    file.write(bytes->data() + at, static_cast<std::streamsize>(n));
    return static_cast<bool>(file);
  }

  // Per run name of `sweep_id`: its id, state, final step, final train/loss and val/loss.
  struct Outcome {
    std::string id, state;
    int64_t step = 0;
    double train_loss = NAN, val_loss = NAN;
  };
  static std::map<std::string, Outcome> Outcomes(ReadOnlyDb& db, int64_t sweep_id) {
    std::map<std::string, Outcome> out;
    for (const auto& row :
         db.Values(absl::StrCat("SELECT r.name, r.id, r.state, r.step, "
                                "(SELECT value FROM canonical_metrics m WHERE m.run_id = r.id AND "
                                "m.name = 'train/loss' ORDER BY step DESC, attempt DESC LIMIT 1), "
                                "(SELECT value FROM canonical_metrics m WHERE m.run_id = r.id AND "
                                "m.name = 'val/loss' ORDER BY step DESC, attempt DESC LIMIT 1) "
                                "FROM runs r WHERE r.sweep_id = ",
                                sweep_id))) {
      Outcome& o = out[row.text[0]];
      o.id = row.text[1];
      o.state = row.text[2];
      o.step = static_cast<int64_t>(row.number[3]);
      if (!row.text[4].empty()) o.train_loss = row.number[4];
      if (!row.text[5].empty()) o.val_loss = row.number[5];
    }
    return out;
  }

  // No series of the run repeats a step; train/loss has a point at least every kLogEvery
  // steps from the start to the run's last step.
  static void ExpectNoGapNoDuplicate(ReadOnlyDb& db, const std::string& name, const Outcome& run) {
    for (const auto& series : db.Values(absl::StrCat(
             "SELECT name, step, COUNT(*) FROM canonical_metrics WHERE run_id = ", run.id,
             " GROUP BY name, step HAVING COUNT(*) > 1"))) {
      ADD_FAILURE() << name << " (run " << run.id << "): " << series.text[2] << " canonical "
                    << series.text[0] << " points at step " << series.text[1];
    }
    std::vector<int64_t> steps;
    for (const auto& row : db.Values(
             absl::StrCat("SELECT DISTINCT step FROM canonical_metrics WHERE run_id = ", run.id,
                          " AND name = 'train/loss' ORDER BY step"))) {
      steps.push_back(static_cast<int64_t>(row.number[0]));
    }
    ASSERT_FALSE(steps.empty()) << name << " has no canonical train/loss";
    EXPECT_LE(steps.front(), kLogEvery) << name << ": train/loss starts late";
    for (size_t i = 1; i < steps.size(); ++i) {
      EXPECT_LE(steps[i] - steps[i - 1], kLogEvery)
          << name << " (run " << run.id << "): train/loss gap after step " << steps[i - 1];
    }
    EXPECT_EQ(steps.back(), run.step) << name << ": train/loss ends before the run's last step";
  }

  static std::string Attempts(ReadOnlyDb& db, const std::string& run_id) {
    std::string text;
    for (const auto& row : db.Values(absl::StrCat(
             "SELECT attempt, worker, outcome, exit_code, resumed_from_step, error FROM attempts "
             "WHERE run_id = ",
             run_id, " ORDER BY attempt"))) {
      absl::StrAppend(&text, "\n    attempt ", row.text[0], " on ", row.text[1], ": ", row.text[2],
                      " (exit ", row.text[3], ", resumed from step ", row.text[4], ") ",
                      row.text[5].substr(0, 300));
    }
    return text;
  }

  Cluster cluster_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::string data_dir_;
};

TEST_F(ChaosTest, SweepSurvivesKillsStopsAndCorruptionWithExactResults) {
  const double budget = DenseBudget(kSteps);
  ASSERT_GT(budget, 0);
  const absl::Time start = absl::Now();

  // Pass 1, no faults: the reference losses.
  const int64_t reference_id = Submit(ChaosSweep("chaos-reference", data_dir_, budget));
  absl::StatusOr<v1::Sweep> reference = cluster_.WaitForSweep(reference_id, absl::Seconds(150));
  ASSERT_TRUE(reference.ok()) << reference.status() << "\n" << cluster_.Logs();
  const double reference_s = absl::ToDoubleSeconds(absl::Now() - start);
  const int64_t reference_steps = StepsDone(reference_id);
  std::cout << "fault-free pass: " << reference_s << " s, " << reference_steps << " steps\n";
  ASSERT_GT(reference_steps, 0);

  // Pass 2: the same six runs under faults, in a seeded random order at random points of the
  // training. A fault lasts seconds of wall time (a SIGSTOP outlives the lease), and the runs
  // train on meanwhile; where they all end before every fault has landed, the faults left
  // land in another faulty sweep of the same six runs. Each sweep takes at least one fault
  // (the first lands within 8% of its steps), so kMaxFaultyPasses bounds it.
  constexpr int kMaxFaultyPasses = 6;
  std::vector<Fault> remaining = {Fault::kKillWorker, Fault::kKillCoordinator,
                                  Fault::kStopWorker, Fault::kCorruptCheckpoint,
                                  Fault::kKillWorker, Fault::kKillCoordinator};
  std::shuffle(remaining.begin(), remaining.end(), rng_);
  std::vector<int64_t> faulty_sweeps;
  for (int pass = 0; !remaining.empty() && pass < kMaxFaultyPasses; ++pass) {
    faulty_sweeps.push_back(
        InjectFaultsInto(absl::StrCat("chaos-", pass + 1), budget, reference_steps, &remaining));
  }
  const std::string logs = cluster_.Logs();
  cluster_.Stop();
  EXPECT_TRUE(remaining.empty()) << remaining.size() << " faults not injected in "
                                 << kMaxFaultyPasses << " faulty sweeps";

  ReadOnlyDb db(cluster_.db_path());
  const std::map<std::string, Outcome> expected = Outcomes(db, reference_id);
  ASSERT_EQ(expected.size(), 6u);
  for (const auto& [name, run] : expected) {
    EXPECT_EQ(run.state, "SUCCEEDED") << "reference " << name << Attempts(db, run.id);
    ExpectNoGapNoDuplicate(db, "reference " + name, run);
  }
  for (int64_t sweep_id : faulty_sweeps) {
    const std::map<std::string, Outcome> actual = Outcomes(db, sweep_id);
    ASSERT_EQ(actual.size(), 6u) << "sweep " << sweep_id;
    for (const auto& [name, run] : actual) {
      SCOPED_TRACE(absl::StrCat("sweep ", sweep_id, ": ", name, " (run ", run.id, ")",
                                Attempts(db, run.id)));
      EXPECT_EQ(run.state, "SUCCEEDED");
      ExpectNoGapNoDuplicate(db, name, run);
      auto it = expected.find(name);
      ASSERT_NE(it, expected.end());
      const Outcome& ref = it->second;
      std::cout << absl::StrFormat(
          "%-28s train/loss %.17g (reference %.17g), val/loss %.17g "
          "(reference %.17g), step %d (reference %d)\n",
          name, run.train_loss, ref.train_loss, run.val_loss, ref.val_loss, run.step, ref.step);
      std::cout << "  attempts:" << Attempts(db, run.id) << "\n";
      EXPECT_EQ(run.step, ref.step);
      // Bit for bit: the same doubles, not merely close ones.
      EXPECT_EQ(absl::StrFormat("%a", run.train_loss), absl::StrFormat("%a", ref.train_loss));
      EXPECT_EQ(absl::StrFormat("%a", run.val_loss), absl::StrFormat("%a", ref.val_loss));
    }
  }
  if (HasFailure()) std::cout << logs;
}

}  // namespace
}  // namespace xmod
