#include "worker/metric_relay.h"

#include <algorithm>
#include <vector>

#include "absl/time/time.h"
#include "glog/logging.h"

namespace xmod {
namespace {

// The coordinator no longer accepts reports for the attempt.
bool IsStaleError(const absl::Status& status) {
  return absl::IsNotFound(status) || absl::IsFailedPrecondition(status);
}

}  // namespace

MetricRelay::MetricRelay(GatewayClient* gateway, Clock* clock, MetricRelayOptions options,
                         WorkerMetrics* metrics)
    : gateway_(gateway), clock_(clock), options_(options), metrics_(metrics) {}

void MetricRelay::set_worker_id(int64_t worker_id) {
  absl::MutexLock lock(&mu_);
  worker_id_ = worker_id;
}

void MetricRelay::set_stale_callback(std::function<void(AttemptKey)> callback) {
  absl::MutexLock lock(&mu_);
  on_stale_ = std::move(callback);
}

void MetricRelay::Open(AttemptKey key) {
  absl::MutexLock lock(&mu_);
  streams_.try_emplace(key);
  ++generation_;
}

int64_t MetricRelay::AddMetric(AttemptKey key, const v1::MetricPoint& point) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  if (it == streams_.end() || it->second.stale) return 0;
  Stream& stream = it->second;
  stream.points.push_back(point);
  ++buffered_;
  ++generation_;
  UpdateGaugeLocked();
  return ++stream.last_seq;
}

void MetricRelay::AddCheckpoint(AttemptKey key, v1::ReportCheckpointRequest checkpoint) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  if (it == streams_.end() || it->second.stale) return;
  checkpoint.set_run_id(key.run_id);
  checkpoint.set_attempt(key.attempt);
  it->second.checkpoints.push_back({it->second.last_seq, std::move(checkpoint)});
  ++generation_;
}

void MetricRelay::Close(AttemptKey key) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  if (it == streams_.end()) return;
  buffered_ -= it->second.points.size();
  streams_.erase(it);
  ++generation_;
  UpdateGaugeLocked();
}

bool MetricRelay::Pump() {
  struct Work {
    AttemptKey key;
    std::vector<v1::ReportCheckpointRequest> checkpoints;
    v1::ReportMetricsRequest metrics;
  };
  std::vector<Work> work;
  {
    absl::MutexLock lock(&mu_);
    const int64_t now = clock_->NowMillis();
    for (auto& [key, stream] : streams_) {
      if (stream.stale || stream.next_try_ms > now) continue;
      Work w{key, {}, {}};
      for (const PendingCheckpoint& cp : stream.checkpoints) {
        if (cp.after_seq > stream.acked_seq) break;
        w.checkpoints.push_back(cp.request);
        w.checkpoints.back().set_worker_id(worker_id_);
      }
      if (!stream.points.empty()) {
        w.metrics.set_worker_id(worker_id_);
        w.metrics.set_run_id(key.run_id);
        w.metrics.set_attempt(key.attempt);
        w.metrics.set_first_seq(stream.acked_seq + 1);
        int n = std::min<int>(options_.max_batch_points, stream.points.size());
        for (int i = 0; i < n; ++i) *w.metrics.add_points() = stream.points[i];
      }
      if (!w.checkpoints.empty() || w.metrics.points_size() > 0) work.push_back(std::move(w));
    }
  }

  bool progressed = false;
  for (const Work& w : work) {
    bool failed = false;
    for (const v1::ReportCheckpointRequest& cp : w.checkpoints) {
      absl::StatusOr<v1::ReportCheckpointResponse> reply = gateway_->ReportCheckpoint(cp);
      if (!reply.ok() && IsStaleError(reply.status())) {
        MarkStale(w.key);
        failed = true;
        break;
      }
      absl::MutexLock lock(&mu_);
      auto it = streams_.find(w.key);
      if (it == streams_.end()) {
        failed = true;
        break;
      }
      if (!reply.ok()) {
        LOG(WARNING) << "run " << w.key.run_id << " attempt " << w.key.attempt
                     << ": ReportCheckpoint failed, will retry: " << reply.status();
        FailedLocked(it->second);
        failed = true;
        break;
      }
      it->second.checkpoints.pop_front();
      it->second.backoff_ms = 0;
      ++generation_;
      progressed = true;
    }
    if (failed || w.metrics.points_size() == 0) continue;

    absl::StatusOr<v1::ReportMetricsResponse> reply = gateway_->ReportMetrics(w.metrics);
    if ((!reply.ok() && IsStaleError(reply.status())) || (reply.ok() && reply->stale())) {
      MarkStale(w.key);
      continue;
    }
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(w.key);
    if (it == streams_.end()) continue;
    Stream& stream = it->second;
    if (!reply.ok()) {
      LOG(WARNING) << "run " << w.key.run_id << " attempt " << w.key.attempt
                   << ": ReportMetrics failed, will retry: " << reply.status();
      FailedLocked(stream);
      continue;
    }
    int64_t acked = std::clamp(reply->acked_seq(), stream.acked_seq, stream.last_seq);
    int64_t dropped = acked - stream.acked_seq;
    for (int64_t i = 0; i < dropped; ++i) stream.points.pop_front();
    stream.acked_seq = acked;
    stream.backoff_ms = 0;
    buffered_ -= dropped;
    relayed_ += dropped;
    if (metrics_ != nullptr) metrics_->points_relayed.Increment(static_cast<double>(dropped));
    UpdateGaugeLocked();
    ++generation_;
    if (dropped > 0) progressed = true;
  }
  return progressed;
}

bool MetricRelay::WaitDelivered(AttemptKey key, absl::Notification* abandon) {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto it = streams_.find(key);
    if (it == streams_.end() || it->second.stale) return false;
    if (DeliveredLocked(it->second)) return true;
    if (abandon != nullptr && abandon->HasBeenNotified()) return false;
    const int64_t generation = generation_;
    auto changed = [this, generation]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return generation_ != generation; };
    mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(200));
  }
}

void MetricRelay::RunPumpLoop(absl::Notification* stop) {
  while (!stop->HasBeenNotified()) {
    const bool progressed = Pump();
    absl::MutexLock lock(&mu_);
    const int64_t now = clock_->NowMillis();
    int64_t wait_ms = 1000;
    for (const auto& [key, stream] : streams_) {
      if (stream.stale || DeliveredLocked(stream)) continue;
      if (stream.next_try_ms <= now) {
        // Due now: go again at once if the last pass moved something, else poll briefly.
        wait_ms = progressed ? 0 : std::min<int64_t>(wait_ms, 10);
      } else {
        wait_ms = std::min(wait_ms, stream.next_try_ms - now);
      }
    }
    if (wait_ms <= 0) continue;
    const int64_t generation = generation_;
    auto changed = [this, generation, stop]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return generation_ != generation || stop->HasBeenNotified();
    };
    mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(wait_ms));
  }
}

void MetricRelay::Interrupt() {
  absl::MutexLock lock(&mu_);
  ++generation_;
}

int64_t MetricRelay::last_seq(AttemptKey key) const {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  return it == streams_.end() ? 0 : it->second.last_seq;
}

int64_t MetricRelay::acked_seq(AttemptKey key) const {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  return it == streams_.end() ? 0 : it->second.acked_seq;
}

bool MetricRelay::stale(AttemptKey key) const {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  return it != streams_.end() && it->second.stale;
}

bool MetricRelay::Delivered(AttemptKey key) const {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  return it != streams_.end() && DeliveredLocked(it->second);
}

size_t MetricRelay::buffered_points() const {
  absl::MutexLock lock(&mu_);
  return buffered_;
}

int64_t MetricRelay::relayed_points() const {
  absl::MutexLock lock(&mu_);
  return relayed_;
}

size_t MetricRelay::pending_checkpoints(AttemptKey key) const {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  return it == streams_.end() ? 0 : it->second.checkpoints.size();
}

bool MetricRelay::DeliveredLocked(const Stream& stream) const {
  return !stream.stale && stream.points.empty() && stream.checkpoints.empty();
}

void MetricRelay::FailedLocked(Stream& stream) {
  stream.backoff_ms = stream.backoff_ms == 0
                          ? options_.initial_backoff_ms
                          : std::min(2 * stream.backoff_ms, options_.max_backoff_ms);
  stream.next_try_ms = clock_->NowMillis() + stream.backoff_ms;
  ++generation_;
}

void MetricRelay::UpdateGaugeLocked() {
  if (metrics_ != nullptr) metrics_->buffer_points.Set(static_cast<double>(buffered_));
}

bool MetricRelay::MarkStale(AttemptKey key) {
  std::function<void(AttemptKey)> callback;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(key);
    if (it == streams_.end() || it->second.stale) return false;
    Stream& stream = it->second;
    LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt << " is stale; dropping "
                 << stream.points.size() << " buffered points";
    stream.stale = true;
    buffered_ -= stream.points.size();
    stream.points.clear();
    stream.checkpoints.clear();
    ++generation_;
    UpdateGaugeLocked();
    callback = on_stale_;
  }
  if (callback) callback(key);
  return true;
}

}  // namespace xmod
