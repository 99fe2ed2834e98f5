// See metric_relay.h. This file: Pump — the reports due, gathered under the lock, then sent
// without it, each stream's checkpoint reports before its metric points and its FinishRun
// once everything else is delivered.
#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "worker/metric_relay.h"

namespace xmod {
namespace {

// The coordinator no longer accepts reports for the attempt.
bool IsStaleError(const absl::Status& status) {
  return absl::IsNotFound(status) || absl::IsFailedPrecondition(status);
}

// The coordinator refuses a report for good: retrying cannot help.
bool IsFinalRefusal(const absl::Status& status) {
  return IsStaleError(status) || absl::IsInvalidArgument(status) || absl::IsAlreadyExists(status) ||
         absl::IsPermissionDenied(status);
}

}  // namespace

bool MetricRelay::Pump() {
  std::vector<Batch> batches;
  {
    absl::MutexLock lock(&mu_);
    batches = BatchesDueLocked();
  }
  bool progressed = false;
  for (const Batch& batch : batches) {
    if (batch.finish) {
      progressed = SendFinish(batch.key, *batch.finish) || progressed;
      continue;
    }
    if (!SendCheckpoints(batch, &progressed) || batch.metrics.points_size() == 0) continue;
    progressed = SendMetrics(batch) || progressed;
  }
  return progressed;
}

std::vector<MetricRelay::Batch> MetricRelay::BatchesDueLocked() {
  std::vector<Batch> batches;
  const int64_t now = clock_->MonotonicMillis();
  for (auto& [key, stream] : streams_) {
    if (stream.next_try_ms > now || !HasWorkLocked(stream)) continue;
    Batch batch{key, {}, {}, std::nullopt};
    if (stream.finish && (stream.stale || DeliveredLocked(stream))) {
      batch.finish = *stream.finish;
      batch.finish->set_worker_id(worker_id_);
      batch.finish->set_last_acked_seq(stream.acked_seq);
      batches.push_back(std::move(batch));
      continue;
    }
    for (const PendingCheckpoint& cp : stream.checkpoints) {
      if (cp.after_seq > stream.acked_seq) break;
      batch.checkpoints.push_back(cp.request);
      batch.checkpoints.back().set_worker_id(worker_id_);
    }
    if (!stream.points.empty()) {
      batch.metrics.set_worker_id(worker_id_);
      batch.metrics.set_run_id(key.run_id);
      batch.metrics.set_attempt(key.attempt);
      batch.metrics.set_first_seq(stream.acked_seq + 1);
      int n = std::min<int>(options_.max_batch_points, stream.points.size());
      for (int i = 0; i < n; ++i) *batch.metrics.add_points() = stream.points[i];
    }
    if (!batch.checkpoints.empty() || batch.metrics.points_size() > 0) {
      batches.push_back(std::move(batch));
    }
  }
  return batches;
}

bool MetricRelay::SendCheckpoints(const Batch& batch, bool* progressed) {
  for (const v1::ReportCheckpointRequest& cp : batch.checkpoints) {
    absl::StatusOr<v1::ReportCheckpointResponse> reply = gateway_->ReportCheckpoint(cp);
    if (!reply.ok() && IsStaleError(reply.status())) {
      MarkStale(batch.key);
      return false;
    }
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(batch.key);
    if (it == streams_.end()) return false;
    if (!reply.ok() && IsFinalRefusal(reply.status())) {
      // Retrying cannot help, and would hold back every later report of the attempt.
      LOG(ERROR) << "run " << batch.key.run_id << " attempt " << batch.key.attempt
                 << ": the coordinator refused checkpoint " << cp.path()
                 << " for good, dropped: " << reply.status();
      it->second.refused_checkpoints.insert(cp.path());
    } else if (!reply.ok()) {
      LOG(WARNING) << "run " << batch.key.run_id << " attempt " << batch.key.attempt
                   << ": ReportCheckpoint failed, will retry: " << reply.status();
      FailedLocked(it->second, reply.status());
      return false;
    }
    it->second.checkpoints.pop_front();
    it->second.backoff_ms = 0;
    ProgressLocked(it->second);
    ++generation_;
    *progressed = true;
  }
  return true;
}

bool MetricRelay::SendMetrics(const Batch& batch) {
  const AttemptKey key = batch.key;
  absl::StatusOr<v1::ReportMetricsResponse> reply = gateway_->ReportMetrics(batch.metrics);
  if ((!reply.ok() && IsStaleError(reply.status())) || (reply.ok() && reply->stale())) {
    MarkStale(key);
    return false;
  }
  if (!reply.ok() && IsFinalRefusal(reply.status())) {
    // Later points cannot be stored past the gap this batch would leave: the attempt ends.
    MarkStale(key, absl::StrCat("the coordinator refused metric points ", batch.metrics.first_seq(),
                                "..", batch.metrics.first_seq() + batch.metrics.points_size() - 1,
                                " for good: ", reply.status().ToString()));
    return false;
  }
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  if (it == streams_.end()) return false;
  Stream& stream = it->second;
  if (!reply.ok()) {
    LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt
                 << ": ReportMetrics failed, will retry: " << reply.status();
    FailedLocked(stream, reply.status());
    return false;
  }
  // Only points held in memory were sent.
  const int64_t in_memory = stream.acked_seq + static_cast<int64_t>(stream.points.size());
  int64_t acked = std::clamp(reply->acked_seq(), stream.acked_seq, in_memory);
  int64_t dropped = acked - stream.acked_seq;
  for (int64_t i = 0; i < dropped; ++i) stream.points.pop_front();
  stream.acked_seq = acked;
  buffered_ -= dropped;
  if (dropped > 0) {
    stream.backoff_ms = 0;
    ProgressLocked(stream);
  } else {
    // Cannot happen with a coordinator that stores contiguously from acked_seq + 1.
    LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt
                 << ": ReportMetrics acknowledged none of seqs from " << batch.metrics.first_seq()
                 << ", will retry";
    FailedLocked(stream, absl::UnknownError("no point acknowledged"));
  }
  RefillLocked(stream, /*all=*/false);
  relayed_ += dropped;
  if (metrics_ != nullptr) metrics_->points_relayed.Increment(static_cast<double>(dropped));
  UpdateGaugeLocked();
  ++generation_;
  return dropped > 0;
}

bool MetricRelay::SendFinish(AttemptKey key, const v1::FinishRunRequest& finish) {
  absl::StatusOr<v1::FinishRunResponse> reply = gateway_->FinishRun(finish);
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  if (it == streams_.end()) return false;
  if (!reply.ok() && !IsFinalRefusal(reply.status())) {
    LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt
                 << ": FinishRun failed, will retry: " << reply.status();
    FailedLocked(it->second, reply.status());
    return false;
  }
  if (!reply.ok()) {
    LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt
                 << ": FinishRun refused: " << reply.status();
  }
  CloseLocked(it);
  return true;
}

}  // namespace xmod
