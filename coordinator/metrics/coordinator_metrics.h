// CoordinatorMetrics: the coordinator's Prometheus metrics (docs/operations.md,
// "Monitoring"): names with the xmod_ prefix, base units, _total counters, and run names
// as labels only for the bounded set of running runs. Owns its prometheus::Registry; an
// Exposer serving it is started by the coordinator. Thread-safe.
#ifndef XMOD_COORDINATOR_METRICS_COORDINATOR_METRICS_H_
#define XMOD_COORDINATOR_METRICS_COORDINATOR_METRICS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace xmod {

// Whether the database takes writes (Store's on_commit, each transaction's outcome):
// xmod_database_writable, xmod_database_unwritable_since_seconds and
// xmod_database_failed_commits_total{code}. Thread-compatible: the store's writer thread
// alone calls Observe().
class DatabaseWriteMetrics {
 public:
  explicit DatabaseWriteMetrics(prometheus::Registry& registry);
  void Observe(const absl::Status& status);

 private:
  prometheus::Gauge& writable_;
  prometheus::Gauge& unwritable_since_;
  prometheus::Family<prometheus::Counter>& failed_commits_;
};

class CoordinatorMetrics {
 public:
  CoordinatorMetrics();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // Runs per state (RunState names), replacing the previous counts.
  void SetRunCounts(const std::map<std::string, int>& counts);
  void SetWorkersConnected(int workers);
  void AddMetricPoints(int points);
  // One store transaction: its duration and size, and whether the database took it. A failed
  // one (a full or failing volume) sets xmod_database_writable to 0 and
  // xmod_database_unwritable_since_seconds to when the failures began; the next committed one
  // sets them back.
  void ObserveCommit(double seconds, int batch_size, const absl::Status& status);
  // One finished RPC: method name, gRPC code name ("OK", "INVALID_ARGUMENT", ...) and the
  // seconds its handler took (authorization included; a stream's whole life).
  void ObserveRpc(const std::string& method, const std::string& code, double seconds);
  // Counts since the database was created: the scheduler adds the stored ones at startup.
  void AddLeasesExpired(int64_t leases);
  void AddOomExits(int64_t exits);
  // PREEMPT orders by cause ("priority" or "quota"; coordinator/scheduling/preemption.h).
  void AddPreemptions(const std::string& cause, int64_t orders);
  // Progress of a running run; the labelled series exist until RunEnded(run).
  void SetRunProgress(const std::string& run, double flops_done, double train_loss);
  // Live matched-FLOP Δ of a running run (coordinator/adaptive/sweep_monitor.h); removed by
  // RunEnded.
  void SetRunLiveDelta(const std::string& run, double delta);
  void RunEnded(const std::string& run);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& runs_;
  prometheus::Gauge& workers_connected_;
  prometheus::Counter& metric_points_;
  prometheus::Histogram& commit_seconds_;
  prometheus::Histogram& batch_size_;
  DatabaseWriteMetrics database_;
  prometheus::Family<prometheus::Counter>& rpcs_;
  prometheus::Family<prometheus::Histogram>& rpc_seconds_;
  prometheus::Counter& leases_expired_;
  prometheus::Counter& oom_exits_;
  prometheus::Family<prometheus::Counter>& preemptions_;
  prometheus::Family<prometheus::Gauge>& run_flops_;
  prometheus::Family<prometheus::Gauge>& run_loss_;
  prometheus::Family<prometheus::Gauge>& run_live_delta_;

  absl::Mutex mu_;
  std::map<std::string, prometheus::Gauge*> run_state_gauges_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::pair<prometheus::Gauge*, prometheus::Gauge*>> active_runs_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, prometheus::Gauge*> live_deltas_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_METRICS_COORDINATOR_METRICS_H_
