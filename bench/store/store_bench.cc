// Metric-ingest throughput of the coordinator's store (points/s): one transaction per point
// versus the writer thread's batched transactions (many concurrent reporters, as many
// workers relaying at once) and versus one report of 64 points. synchronous=FULL, WAL, on
// the filesystem of $TMPDIR (default /tmp).
//   bench_store --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/store/store.h"
#include "coordinator/store/store_writes.h"
#include "trainer_contract/series.h"

namespace xmod {
namespace {

Store* g_store = nullptr;
std::atomic<int64_t> g_seq{0};

std::vector<xmod::v1::MetricPoint> Points(int n) {
  std::vector<xmod::v1::MetricPoint> points(n);
  for (int i = 0; i < n; ++i) {
    points[i].set_name(SeriesName(xmod::v1::SERIES_TRAIN_LOSS));
    points[i].set_step(i);
    points[i].set_tokens(i * 4096);
    points[i].set_flops(i * 1e12);
    points[i].set_value(3.0);
  }
  return points;
}

// Each call reports `points_per_report` points and waits until they are durable.
void Report(benchmark::State& state, int points_per_report) {
  const std::vector<xmod::v1::MetricPoint> points = Points(points_per_report);
  for (auto _ : state) {
    const int64_t first = g_seq.fetch_add(points_per_report);
    absl::Status s =
        g_store->WriteAndWait([&](Db& db) { return InsertMetrics(db, 1, 1, first, points); });
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  state.SetItemsProcessed(state.iterations() * points_per_report);
}

// Sequential reporter: every point is its own transaction (and its own fsync).
void BM_OneTransactionPerPoint(benchmark::State& state) { Report(state, 1); }
BENCHMARK(BM_OneTransactionPerPoint)->UseRealTime();

// Concurrent reporters, one point each: the writer commits whatever queued up together.
void BM_ConcurrentReportersBatched(benchmark::State& state) { Report(state, 1); }
BENCHMARK(BM_ConcurrentReportersBatched)->Threads(8)->Threads(64)->UseRealTime();

// One report carrying 64 points (how a worker relays a trainer's buffered points).
void BM_Reports64Points(benchmark::State& state) { Report(state, 64); }
BENCHMARK(BM_Reports64Points)->UseRealTime();
BENCHMARK(BM_Reports64Points)->Threads(8)->UseRealTime();

}  // namespace
}  // namespace xmod

int main(int argc, char** argv) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/xmod-store-bench-", getpid());
  std::filesystem::create_directories(dir);
  absl::StatusOr<std::unique_ptr<xmod::Store>> store =
      xmod::Store::Open(dir + "/bench.db", xmod::StoreOptions{});
  if (!store.ok()) {
    fprintf(stderr, "%s\n", std::string(store.status().message()).c_str());
    return 1;
  }
  xmod::g_store = store->get();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  store->reset();
  std::filesystem::remove_all(dir);
  return 0;
}
