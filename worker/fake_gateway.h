// A scripted, in-memory WorkerGateway for worker tests (see gateway_client.h). It stores
// metric points keyed by (run, attempt, seq) the way the coordinator must — idempotently,
// acknowledging the highest contiguous seq, refusing a point whose name is past
// kMaxMetricNameBytes — and can be told to fail calls, acknowledge
// partially, mark attempts stale, hand out assignments and send orders.
//
// Thread-safety: every method is thread-safe.
#ifndef XMOD_WORKER_FAKE_GATEWAY_H_
#define XMOD_WORKER_FAKE_GATEWAY_H_

#include <deque>
#include <map>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/gateway_client.h"
#include "worker/metric_relay.h"

namespace xmod {

class FakeGateway : public GatewayClient {
 public:
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request) override;
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) override;
  // Hands out the next queued assignment, waiting up to min(wait_ms, acquire_block) for one.
  absl::StatusOr<v1::AcquireRunResponse> AcquireRun(const v1::AcquireRunRequest& request) override;
  absl::StatusOr<v1::ReportMetricsResponse> ReportMetrics(
      const v1::ReportMetricsRequest& request) override;
  absl::StatusOr<v1::ReportCheckpointResponse> ReportCheckpoint(
      const v1::ReportCheckpointRequest& request) override;
  absl::StatusOr<v1::FinishRunResponse> FinishRun(const v1::FinishRunRequest& request) override;

  // Scripting.
  void QueueAssignment(v1::Assignment assignment);
  void QueueOrder(v1::Order order);  // sent with the next heartbeat reply
  void RequestReregister();          // the next heartbeat reply says reregister
  // The next n ReportMetrics fail with `code` (a refusal, or unreachable).
  void FailNextMetricCalls(int n, absl::StatusCode code = absl::StatusCode::kUnavailable);
  void FailNextCheckpointCalls(int n);  // the next n ReportCheckpoint return UNAVAILABLE
  void RefuseCheckpointsAt(const std::string& path);  // INVALID_ARGUMENT for reports of it
  void FailNextHeartbeats(int n);                     // the next n Heartbeat return UNAVAILABLE
  void set_max_ack_per_call(int64_t n);               // store at most n new points per call
  void MarkStale(AttemptKey key);                     // ReportMetrics replies stale for it
  void set_acquire_block(absl::Duration d);           // default 20 ms

  // Recorded state.
  std::vector<v1::MetricPoint> Points(AttemptKey key) const;  // durable, in seq order
  int64_t duplicate_points() const;  // points received again after being stored
  int metric_calls() const;
  int checkpoint_calls() const;  // ReportCheckpoint calls, failed ones included
  std::vector<v1::ReportCheckpointRequest> Checkpoints() const;
  std::vector<v1::FinishRunRequest> Finishes() const;
  std::vector<v1::RegisterRequest> Registrations() const;
  int heartbeats() const;
  std::vector<v1::HeartbeatRequest> LastHeartbeats(size_t n) const;
  // Waits (bounded) until at least n FinishRun calls arrived; false on timeout.
  bool WaitForFinishes(size_t n, absl::Duration timeout = absl::Seconds(30)) const;
  bool WaitForHeartbeats(int n, absl::Duration timeout = absl::Seconds(30)) const;

  static constexpr int64_t kWorkerId = 7;
  static constexpr int64_t kHeartbeatIntervalMs = 10;

 private:
  mutable absl::Mutex mu_;
  std::deque<v1::Assignment> assignments_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Order> orders_ ABSL_GUARDED_BY(mu_);
  bool reregister_ ABSL_GUARDED_BY(mu_) = false;
  int fail_metrics_ ABSL_GUARDED_BY(mu_) = 0;
  absl::StatusCode fail_metrics_code_ ABSL_GUARDED_BY(mu_) = absl::StatusCode::kUnavailable;
  int fail_checkpoints_ ABSL_GUARDED_BY(mu_) = 0;
  int checkpoint_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::string refused_checkpoint_path_ ABSL_GUARDED_BY(mu_);
  int fail_heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_ack_ ABSL_GUARDED_BY(mu_) = 0;  // 0 = unlimited
  std::set<AttemptKey> stale_ ABSL_GUARDED_BY(mu_);
  absl::Duration acquire_block_ ABSL_GUARDED_BY(mu_) = absl::Milliseconds(20);
  std::map<AttemptKey, std::vector<v1::MetricPoint>> points_ ABSL_GUARDED_BY(mu_);
  int64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
  int metric_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::ReportCheckpointRequest> checkpoints_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::FinishRunRequest> finishes_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RegisterRequest> registrations_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::HeartbeatRequest> heartbeats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xmod

#endif  // XMOD_WORKER_FAKE_GATEWAY_H_
