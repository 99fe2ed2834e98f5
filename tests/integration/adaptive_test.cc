// An adaptive sweep end to end (docs/adaptive-design.md): the real xmod-coordinator and two
// xmod-workers on loopback, whose trainer is worker/fake_train in its law mode, so every
// run's validation loss is a dense curve plus the Δ of a known Eq. 14 law. The coordinator
// must queue the seed set, decide as runs complete, stop within the compute budget with the
// (K, A) that the true law says is best at the target, and have streamed the live
// matched-FLOP Δ of the sparse runs (equal to the true Δ, the fake being noise-free).
#include <cstdlib>
#include <iostream>
#include <limits>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "fitter/law.h"
#include "fitter/law_json.h"
#include "fitter/observations.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster.h"
#include "tests/integration/test_db.h"

namespace xmod {
namespace {

// The law the CPU-scale reproduction fitted (docs/paper-fidelity.md): an interior K* that
// grows with L, so the answer depends on the runs.
constexpr const char* kTruthJson =
    R"({"e": -0.0382, "u": 0.715, "eta_n": 0.0545, "rho_n": 0.609, "w": 3.505,
        "eta_l": 0.1965, "rho_l": 0.05, "z": 0.002, "rho_k": 0.353, "rho_a": 1.09})";
constexpr double kBudget = 5e11;
// The questions: (K*, A*) at two contexts, whose true answers differ (K* grows with L).
constexpr int kTargetLens[] = {128, 512};

fitter::LawParams Truth() {
  absl::StatusOr<fitter::LawParams> truth = fitter::LawParamsFromJson(kTruthJson);
  EXPECT_TRUE(truth.ok()) << truth.status();
  return truth.value_or(fitter::LawParams());
}

double TrueDelta(const std::string& backbone, int seq_len, int k, double a) {
  if (k == 1) return 0;
  absl::StatusOr<fitter::Observation> at =
      fitter::MakeDeltaObservation("truth", backbone, seq_len, k, a, 0.0);
  EXPECT_TRUE(at.ok()) << at.status();
  return at.ok() ? fitter::PredictDelta(Truth(), at->point()) : 0;
}

v1::SweepSpec AdaptiveSpec(const std::string& data_glob) {
  v1::SweepSpec spec;
  spec.set_name("adaptive-e2e");
  v1::GridSpec* grid = spec.add_grids();
  grid->set_label("design");
  grid->add_archs(v1::XMOD);
  for (const char* b : {"cpu-d64", "cpu-d96", "cpu-d128"}) grid->add_backbones(b);
  for (int l : {64, 128, 256, 512}) grid->add_seq_lens(l);
  for (int k : {1, 2, 4, 8, 16}) grid->add_ks(k);
  for (double a : {0.5, 1.0, 2.0}) grid->add_as(a);
  v1::TrainingSpec* t = spec.mutable_training();
  t->set_flop_budget(kBudget);
  t->set_batch_tokens(1024);
  t->set_eval_marks(2);
  t->set_eval_tokens(1024);
  t->set_seed(1);
  spec.mutable_data()->set_train_glob(data_glob);
  spec.mutable_data()->set_val_glob(data_glob);
  v1::AdaptiveSpec* adaptive = spec.mutable_adaptive();
  adaptive->set_enabled(true);
  for (int seq_len : kTargetLens) {
    v1::DesignTarget* target = adaptive->add_targets();
    target->set_flops(kBudget);
    target->set_seq_len(seq_len);
    target->set_backbone("cpu-d96");
  }
  adaptive->set_compute_budget(60 * kBudget);
  adaptive->set_max_in_flight(4);
  adaptive->set_bootstrap_samples(16);
  adaptive->set_seed(3);
  return spec;
}

TEST(AdaptiveSweepTest, StopsWithinBudgetWithTheTrueBestConfiguration) {
  Cluster cluster;
  const std::string truth_path = cluster.dir() + "/truth.json";
  ASSERT_TRUE(WriteFileAtomic(truth_path, kTruthJson).ok());
  const std::string shard = cluster.dir() + "/unused_shard.bin";
  ASSERT_TRUE(WriteFileAtomic(shard, "").ok());
  // The workers start fake_train as their trainer, which inherits the rest.
  setenv("XMOD_TRAIN_BIN", XMOD_FAKE_TRAIN, 1);
  setenv("FAKE_TRAIN_MODE", "law", 1);
  setenv("FAKE_TRAIN_LAW", truth_path.c_str(), 1);
  setenv("FAKE_TRAIN_STEPS", "2", 1);
  setenv("FAKE_TRAIN_STEP_MS", "50", 1);
  ASSERT_TRUE(cluster
                  .StartCoordinator({"--nocheck_data_paths", "--lease_ttl_ms=10000",
                                     "--heartbeat_interval_ms=300"})
                  .ok())
      << cluster.Logs();
  ASSERT_TRUE(cluster.StartWorker("w1", 2).ok()) << cluster.Logs();
  ASSERT_TRUE(cluster.StartWorker("w2", 2).ok()) << cluster.Logs();

  v1::SubmitSweepRequest request;
  *request.mutable_spec() = AdaptiveSpec(shard);
  v1::SubmitSweepResponse response;
  grpc::ClientContext context;
  grpc::Status submitted = cluster.stub().SubmitSweep(&context, request, &response);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  const int seed_runs = response.runs_size();
  EXPECT_GT(seed_runs, 10);   // the seed set ...
  EXPECT_LT(seed_runs, 156);  // ... not the 156 candidates of the grid
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::Sweep> sweep = cluster.WaitForSweep(response.sweep_id(), absl::Seconds(400));
  std::cout << "adaptive sweep took " << absl::ToDoubleSeconds(absl::Now() - start) << " s\n";
  ASSERT_TRUE(sweep.ok()) << sweep.status() << "\n" << cluster.Logs();
  EXPECT_EQ(sweep->state(), v1::SWEEP_DONE) << sweep->ShortDebugString() << cluster.Logs();
  cluster.Stop();

  ReadOnlyDb db(cluster.db_path());
  // The last decision stopped the design, within the budget, with the true best (K, A).
  auto last = db.Values(
      "SELECT id, stop, compute_spent, compute_budget, hex(decision) FROM design_decisions "
      "ORDER BY id DESC LIMIT 1");
  ASSERT_EQ(last.size(), 1u) << cluster.Logs();
  EXPECT_EQ(last[0].text[1], "1") << "the design never stopped\n" << cluster.Logs();
  EXPECT_LE(last[0].number[2], last[0].number[3]);
  v1::DesignDecision decision;
  ASSERT_TRUE(decision.ParseFromString(absl::HexStringToBytes(last[0].text[4])));
  ASSERT_EQ(decision.recommendations_size(), 2);
  for (int t = 0; t < 2; ++t) {
    const int seq_len = kTargetLens[t];
    int best_k = 0;
    double best_a = 0;
    double best = std::numeric_limits<double>::infinity();
    for (int k : {1, 2, 4, 8, 16}) {
      for (double a : {0.5, 1.0, 2.0}) {
        if (k > 1 && k * a != static_cast<int>(k * a)) continue;  // A·K must be whole
        const double d = TrueDelta("cpu-d96", seq_len, k, a);
        std::cout << "true delta L=" << seq_len << " K=" << k << " A=" << a << ": " << d << "\n";
        if (d < best) {
          best = d;
          best_k = k;
          best_a = a;
        }
      }
    }
    const v1::TargetRecommendation& r = decision.recommendations(t);
    EXPECT_EQ(r.target().seq_len(), seq_len);
    EXPECT_EQ(r.k(), best_k) << "L=" << seq_len << " " << decision.ShortDebugString();
    if (best_k > 1) EXPECT_EQ(r.a(), best_a) << "L=" << seq_len;
    std::cout << "L=" << seq_len << ": recommended K=" << r.k() << " A=" << r.a()
              << ", truly best K=" << best_k << " A=" << best_a << "\n";
  }
  std::cout << db.Rows("SELECT id FROM design_decisions").size() << " decisions, "
            << db.Rows("SELECT id FROM runs").size() << " runs; stop: " << decision.stop_reason()
            << "\n";

  // Every queued proposal names a run of the sweep; every run is the seed set or a proposal.
  auto orphans = db.Rows(
      "SELECT p.run_id FROM design_proposals p LEFT JOIN runs r ON r.id = p.run_id "
      "WHERE p.run_id IS NOT NULL AND r.id IS NULL");
  EXPECT_TRUE(orphans.empty());
  auto proposed = db.Rows("SELECT COUNT(*) FROM design_proposals WHERE run_id IS NOT NULL");
  auto runs = db.Rows("SELECT COUNT(*) FROM runs");
  EXPECT_GT(std::stoi(runs[0][0]), seed_runs);  // it went past the seed set
  EXPECT_LE(std::stoi(proposed[0][0]), std::stoi(runs[0][0]) - seed_runs);

  // The live Δ of each succeeded sparse run is its true Δ (dense and sparse share the curve).
  auto live = db.Values(
      "SELECT r.backbone, r.seq_len, r.k, r.a, d.delta FROM live_delta d "
      "JOIN runs r ON r.id = d.run_id WHERE r.state = 'SUCCEEDED' AND r.arch = 'XMOD'");
  ASSERT_FALSE(live.empty());
  for (const auto& row : live) {
    EXPECT_NEAR(row.number[4],
                TrueDelta(row.text[0], static_cast<int>(row.number[1]),
                          static_cast<int>(row.number[2]), row.number[3]),
                1e-9)
        << row.text[0] << " L=" << row.text[1] << " K=" << row.text[2] << " A=" << row.text[3];
  }
}

}  // namespace
}  // namespace xmod
