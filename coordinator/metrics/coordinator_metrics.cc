// See coordinator_metrics.h.
#include "coordinator/metrics/coordinator_metrics.h"

#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "common/build_metrics.h"
#include "xmod/v1/types.pb.h"

namespace xmod {
namespace {

prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& registry,
                                                   const std::string& name,
                                                   const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& registry,
                                                       const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

// A histogram without labels.
prometheus::Histogram& HistogramOf(prometheus::Registry& registry, const std::string& name,
                                   const std::string& help,
                                   prometheus::Histogram::BucketBoundaries buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add(
      {}, std::move(buckets));
}

// xmod_rpc_duration_seconds: a heartbeat takes about a millisecond, a long poll up to its
// wait, a WatchSweep stream as long as it is watched.
const prometheus::Histogram::BucketBoundaries kRpcBuckets = {0.001, 0.003, 0.01, 0.03, 0.1, 0.3,
                                                             1,     3,     10,   30,   100};

}  // namespace

DatabaseWriteMetrics::DatabaseWriteMetrics(prometheus::Registry& registry)
    : writable_(prometheus::BuildGauge()
                    .Name("xmod_database_writable")
                    .Help("1 while the database takes writes; 0 from a transaction it could not "
                          "commit (a full or failing volume: new work is refused) until one "
                          "commits again")
                    .Register(registry)
                    .Add({})),
      unwritable_since_(prometheus::BuildGauge()
                            .Name("xmod_database_unwritable_since_seconds")
                            .Help("Unix time of the first failed commit while the database "
                                  "cannot be written; 0 while it can")
                            .Register(registry)
                            .Add({})),
      failed_commits_(prometheus::BuildCounter()
                          .Name("xmod_database_failed_commits_total")
                          .Help("Store transactions the database could not commit, by gRPC "
                                "code of the cause (RESOURCE_EXHAUSTED: full; UNAVAILABLE: I/O "
                                "error)")
                          .Register(registry)) {
  writable_.Set(1);
}

void DatabaseWriteMetrics::Observe(const absl::Status& status) {
  if (status.ok()) {
    writable_.Set(1);
    unwritable_since_.Set(0);
    return;
  }
  failed_commits_.Add({{"code", absl::StatusCodeToString(status.code())}}).Increment();
  if (unwritable_since_.Value() == 0) {
    unwritable_since_.Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  }
  writable_.Set(0);
}

CoordinatorMetrics::CoordinatorMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      runs_(GaugeFamily(*registry_, "xmod_runs", "Runs in each state, over every sweep")),
      workers_connected_(GaugeFamily(*registry_, "xmod_workers_connected",
                                     "Workers heard from within one lease TTL")
                             .Add({})),
      metric_points_(CounterFamily(*registry_, "xmod_metric_points_ingested_total",
                                   "Metric points made durable")
                         .Add({})),
      commit_seconds_(HistogramOf(*registry_, "xmod_store_commit_seconds",
                                  "Duration of one store transaction (writes + commit)",
                                  {0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1})),
      batch_size_(HistogramOf(*registry_, "xmod_store_batch_size",
                              "Write closures committed in one store transaction",
                              {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096})),
      database_(*registry_),
      rpcs_(CounterFamily(*registry_, "xmod_rpc_requests_total",
                          "gRPC requests handled, by method and status code")),
      rpc_seconds_(prometheus::BuildHistogram()
                       .Name("xmod_rpc_duration_seconds")
                       .Help("Seconds the coordinator took to handle a gRPC request (a "
                             "stream: its whole life), by method")
                       .Register(*registry_)),
      leases_expired_(CounterFamily(*registry_, "xmod_leases_expired_total",
                                    "Attempts ended as lost because their lease expired, since "
                                    "the database was created")
                          .Add({})),
      oom_exits_(CounterFamily(*registry_, "xmod_oom_exits_total",
                               "Attempts that failed with the trainer out of memory (exit 5), "
                               "since the database was created")
                     .Add({})),
      preemptions_(CounterFamily(*registry_, "xmod_preemptions_total",
                                 "PREEMPT orders the scheduler gave running attempts, by cause "
                                 "(priority, quota), since the database was created")),
      run_flops_(GaugeFamily(*registry_, "xmod_run_flops_done",
                             "Training FLOPs spent by each running run")),
      run_loss_(GaugeFamily(*registry_, "xmod_run_train_loss",
                            "Latest training loss (nats) of each running run")),
      run_live_delta_(GaugeFamily(*registry_, "xmod_run_live_delta",
                                  "Live matched-FLOP delta (nats) of each running sparse run: "
                                  "val/loss minus its dense reference's at the same FLOPs")) {
  AddBuildInfoGauge(*registry_);
  absl::MutexLock lock(&mu_);
  for (xmod::v1::RunState state : {xmod::v1::QUEUED, xmod::v1::RUNNING, xmod::v1::SUCCEEDED,
                                   xmod::v1::FAILED, xmod::v1::CANCELLED}) {
    const std::string name = xmod::v1::RunState_Name(state);
    run_state_gauges_[name] = &runs_.Add({{"state", name}});
  }
}

void CoordinatorMetrics::SetRunCounts(const std::map<std::string, int>& counts) {
  absl::MutexLock lock(&mu_);
  for (auto& [state, gauge] : run_state_gauges_) {
    auto it = counts.find(state);
    gauge->Set(it == counts.end() ? 0 : it->second);
  }
}

void CoordinatorMetrics::SetWorkersConnected(int workers) { workers_connected_.Set(workers); }

void CoordinatorMetrics::AddMetricPoints(int points) { metric_points_.Increment(points); }

void CoordinatorMetrics::ObserveCommit(double seconds, int batch_size, const absl::Status& status) {
  commit_seconds_.Observe(seconds);
  batch_size_.Observe(batch_size);
  database_.Observe(status);
}

void CoordinatorMetrics::ObserveRpc(const std::string& method, const std::string& code,
                                    double seconds) {
  rpcs_.Add({{"method", method}, {"code", code}}).Increment();
  rpc_seconds_.Add({{"method", method}}, kRpcBuckets).Observe(seconds);
}

void CoordinatorMetrics::AddLeasesExpired(int64_t leases) {
  leases_expired_.Increment(static_cast<double>(leases));
}

void CoordinatorMetrics::AddOomExits(int64_t exits) {
  oom_exits_.Increment(static_cast<double>(exits));
}

void CoordinatorMetrics::AddPreemptions(const std::string& cause, int64_t orders) {
  preemptions_.Add({{"cause", cause}}).Increment(static_cast<double>(orders));
}

void CoordinatorMetrics::SetRunProgress(const std::string& run, double flops_done,
                                        double train_loss) {
  absl::MutexLock lock(&mu_);
  auto it = active_runs_.find(run);
  if (it == active_runs_.end()) {
    it = active_runs_
             .emplace(run, std::make_pair(&run_flops_.Add({{"run", run}}),
                                          &run_loss_.Add({{"run", run}})))
             .first;
  }
  if (flops_done > 0) it->second.first->Set(flops_done);
  if (train_loss > 0) it->second.second->Set(train_loss);
}

void CoordinatorMetrics::RunEnded(const std::string& run) {
  absl::MutexLock lock(&mu_);
  auto it = active_runs_.find(run);
  if (it == active_runs_.end()) return;
  run_flops_.Remove(it->second.first);
  run_loss_.Remove(it->second.second);
  active_runs_.erase(it);
  auto delta = live_deltas_.find(run);
  if (delta != live_deltas_.end()) {
    run_live_delta_.Remove(delta->second);
    live_deltas_.erase(delta);
  }
}

void CoordinatorMetrics::SetRunLiveDelta(const std::string& run, double delta) {
  absl::MutexLock lock(&mu_);
  // Only runs with a progress series are running; an ended run's report comes too late.
  if (active_runs_.count(run) == 0) return;
  auto it = live_deltas_.find(run);
  if (it == live_deltas_.end()) {
    it = live_deltas_.emplace(run, &run_live_delta_.Add({{"run", run}})).first;
  }
  it->second->Set(delta);
}

}  // namespace xmod
