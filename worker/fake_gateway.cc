#include "worker/fake_gateway.h"

#include <algorithm>

#include "common/metric_limits.h"

namespace xmod {

absl::StatusOr<v1::RegisterResponse> FakeGateway::Register(const v1::RegisterRequest& request) {
  absl::MutexLock lock(&mu_);
  registrations_.push_back(request);
  v1::RegisterResponse reply;
  reply.set_worker_id(kWorkerId);
  reply.set_heartbeat_interval_ms(kHeartbeatIntervalMs);
  reply.set_lease_ttl_ms(1000);
  return reply;
}

absl::StatusOr<v1::HeartbeatResponse> FakeGateway::Heartbeat(const v1::HeartbeatRequest& request) {
  absl::MutexLock lock(&mu_);
  if (fail_heartbeats_ > 0) {
    --fail_heartbeats_;
    return absl::UnavailableError("fake: coordinator unreachable");
  }
  heartbeats_.push_back(request);
  v1::HeartbeatResponse reply;
  for (v1::Order& order : orders_) *reply.add_orders() = std::move(order);
  orders_.clear();
  reply.set_reregister(reregister_);
  reregister_ = false;
  return reply;
}

absl::StatusOr<v1::AcquireRunResponse> FakeGateway::AcquireRun(
    const v1::AcquireRunRequest& request) {
  absl::MutexLock lock(&mu_);
  auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !assignments_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&has_work),
                       std::min(acquire_block_, absl::Milliseconds(request.wait_ms())));
  v1::AcquireRunResponse reply;
  if (assignments_.empty()) return reply;
  *reply.mutable_assignment() = std::move(assignments_.front());
  assignments_.pop_front();
  return reply;
}

absl::StatusOr<v1::ReportMetricsResponse> FakeGateway::ReportMetrics(
    const v1::ReportMetricsRequest& request) {
  absl::MutexLock lock(&mu_);
  ++metric_calls_;
  if (fail_metrics_ > 0) {
    --fail_metrics_;
    return absl::Status(fail_metrics_code_, "fake: ReportMetrics failed");
  }
  for (const v1::MetricPoint& point : request.points()) {
    if (point.name().size() > kMaxMetricNameBytes) {
      return absl::InvalidArgumentError("points[i].name: fake: past the coordinator's limit");
    }
  }
  const AttemptKey key{request.run_id(), request.attempt()};
  v1::ReportMetricsResponse reply;
  if (stale_.count(key) > 0) {
    reply.set_stale(true);
    return reply;
  }
  std::vector<v1::MetricPoint>& stored = points_[key];
  int64_t added = 0;
  for (int i = 0; i < request.points_size(); ++i) {
    const int64_t seq = request.first_seq() + i;
    if (seq <= static_cast<int64_t>(stored.size())) {
      ++duplicates_;
      continue;
    }
    if (seq != static_cast<int64_t>(stored.size()) + 1) break;  // a gap: keep what is contiguous
    if (max_ack_ > 0 && added == max_ack_) break;
    stored.push_back(request.points(i));
    ++added;
  }
  reply.set_acked_seq(static_cast<int64_t>(stored.size()));
  return reply;
}

absl::StatusOr<v1::ReportCheckpointResponse> FakeGateway::ReportCheckpoint(
    const v1::ReportCheckpointRequest& request) {
  absl::MutexLock lock(&mu_);
  ++checkpoint_calls_;
  if (fail_checkpoints_ > 0) {
    --fail_checkpoints_;
    return absl::UnavailableError("fake: coordinator unreachable");
  }
  if (!refused_checkpoint_path_.empty() && request.path() == refused_checkpoint_path_) {
    return absl::InvalidArgumentError("path: fake: not inside the run's folder");
  }
  checkpoints_.push_back(request);
  return v1::ReportCheckpointResponse();
}

absl::StatusOr<v1::FinishRunResponse> FakeGateway::FinishRun(const v1::FinishRunRequest& request) {
  absl::MutexLock lock(&mu_);
  finishes_.push_back(request);
  return v1::FinishRunResponse();
}

void FakeGateway::RefuseCheckpointsAt(const std::string& path) {
  absl::MutexLock lock(&mu_);
  refused_checkpoint_path_ = path;
}

void FakeGateway::FailNextHeartbeats(int n) {
  absl::MutexLock lock(&mu_);
  fail_heartbeats_ = n;
}

void FakeGateway::QueueAssignment(v1::Assignment assignment) {
  absl::MutexLock lock(&mu_);
  assignments_.push_back(std::move(assignment));
}

void FakeGateway::QueueOrder(v1::Order order) {
  absl::MutexLock lock(&mu_);
  orders_.push_back(std::move(order));
}

void FakeGateway::RequestReregister() {
  absl::MutexLock lock(&mu_);
  reregister_ = true;
}

void FakeGateway::FailNextMetricCalls(int n, absl::StatusCode code) {
  absl::MutexLock lock(&mu_);
  fail_metrics_ = n;
  fail_metrics_code_ = code;
}

void FakeGateway::FailNextCheckpointCalls(int n) {
  absl::MutexLock lock(&mu_);
  fail_checkpoints_ = n;
}

void FakeGateway::set_max_ack_per_call(int64_t n) {
  absl::MutexLock lock(&mu_);
  max_ack_ = n;
}

void FakeGateway::MarkStale(AttemptKey key) {
  absl::MutexLock lock(&mu_);
  stale_.insert(key);
}

void FakeGateway::set_acquire_block(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  acquire_block_ = d;
}

std::vector<v1::MetricPoint> FakeGateway::Points(AttemptKey key) const {
  absl::MutexLock lock(&mu_);
  auto it = points_.find(key);
  return it == points_.end() ? std::vector<v1::MetricPoint>() : it->second;
}

int64_t FakeGateway::duplicate_points() const {
  absl::MutexLock lock(&mu_);
  return duplicates_;
}

int FakeGateway::metric_calls() const {
  absl::MutexLock lock(&mu_);
  return metric_calls_;
}

int FakeGateway::checkpoint_calls() const {
  absl::MutexLock lock(&mu_);
  return checkpoint_calls_;
}

std::vector<v1::ReportCheckpointRequest> FakeGateway::Checkpoints() const {
  absl::MutexLock lock(&mu_);
  return checkpoints_;
}

std::vector<v1::FinishRunRequest> FakeGateway::Finishes() const {
  absl::MutexLock lock(&mu_);
  return finishes_;
}

std::vector<v1::RegisterRequest> FakeGateway::Registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

int FakeGateway::heartbeats() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(heartbeats_.size());
}

std::vector<v1::HeartbeatRequest> FakeGateway::LastHeartbeats(size_t n) const {
  absl::MutexLock lock(&mu_);
  size_t from = heartbeats_.size() > n ? heartbeats_.size() - n : 0;
  return {heartbeats_.begin() + from, heartbeats_.end()};
}

bool FakeGateway::WaitForFinishes(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto ready = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finishes_.size() >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
}

bool FakeGateway::WaitForHeartbeats(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto ready = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(heartbeats_.size()) >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
}

}  // namespace xmod
