// See metric_relay.h. This file: the streams — points, checkpoint reports and outcomes handed
// in by the agent — their waits and their state; metric_relay_send.cc sends them,
// metric_relay_spill.cc spills, keeps and replays them.
#include "worker/metric_relay.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/metric_limits.h"
#include "glog/logging.h"
#include "worker/spill_file.h"

namespace xmod {
namespace {

// The call did not reach the coordinator (or its answer did not come back).
bool IsUnreachable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

}  // namespace

MetricRelay::MetricRelay(GatewayClient* gateway, Clock* clock, MetricRelayOptions options,
                         WorkerMetrics* metrics)
    : gateway_(gateway), clock_(clock), options_(std::move(options)), metrics_(metrics) {
  if (options_.spill_dir.empty()) return;
  if (absl::Status s = MakeDirs(options_.spill_dir); !s.ok()) {
    LOG(ERROR) << "metric spill folder: " << s << "; points stay in memory";
    return;
  }
  absl::MutexLock lock(&mu_);
  LoadSpillFolderLocked();
}

MetricRelay::~MetricRelay() = default;

void MetricRelay::set_worker_id(int64_t worker_id) {
  absl::MutexLock lock(&mu_);
  worker_id_ = worker_id;
}

void MetricRelay::set_stale_callback(std::function<void(AttemptKey, const std::string&)> callback) {
  absl::MutexLock lock(&mu_);
  on_stale_ = std::move(callback);
}

void MetricRelay::Open(AttemptKey key) {
  absl::MutexLock lock(&mu_);
  streams_.try_emplace(key);
  ++generation_;
}

int64_t MetricRelay::AddMetric(AttemptKey key, const v1::MetricPoint& point) {
  int64_t seq = 0;
  std::string overflow;  // why the attempt must stop, when this point overflowed its buffer
  std::function<void(AttemptKey, const std::string&)> callback;
  {
    absl::MutexLock lock(&mu_);
    seq = AddMetricLocked(key, point, &overflow);
    callback = on_stale_;
  }
  if (!overflow.empty() && callback) callback(key, overflow);
  return seq;
}

int64_t MetricRelay::AddMetricLocked(AttemptKey key, const v1::MetricPoint& point,
                                     std::string* overflow) {
  auto it = streams_.find(key);
  if (it == streams_.end() || it->second.stale) return 0;
  Stream& stream = it->second;
  if (point.name().size() > kMaxMetricNameBytes) {
    // The coordinator would refuse the whole batch holding it.
    if (++stream.names_too_long == 1) {
      LOG(ERROR) << "run " << key.run_id << " attempt " << key.attempt << ": dropping metric \""
                 << point.name().substr(0, 64) << "...\": its name is " << point.name().size()
                 << " bytes, at most " << kMaxMetricNameBytes
                 << " (later ones are counted in xmod_worker_metric_points_dropped_total)";
    }
    if (metrics_ != nullptr) metrics_->points_dropped_name_too_long.Increment();
    return 0;
  }
  if (!stream.refusal.empty() || OverflowsLocked(key, stream, overflow)) {
    if (metrics_ != nullptr) metrics_->points_dropped_buffer_full.Increment();
    return 0;
  }
  const int64_t seq = ++stream.last_seq;
  ++buffered_;
  ++generation_;
  const bool behind_spilled = stream.spill != nullptr && stream.spill->unread() > 0;
  if (!options_.spill_dir.empty() && !stream.spill_failed &&
      (behind_spilled ||
       static_cast<int64_t>(stream.points.size()) >= options_.max_memory_points)) {
    if (SpillLocked(key, stream, seq, point)) {
      ++spilled_;
      UpdateGaugeLocked();
      return seq;
    }
    // Keep the order: whatever waits on disk comes back first.
    stream.spill_failed = true;
    RefillLocked(stream, /*all=*/true);
  }
  stream.points.push_back(point);
  UpdateGaugeLocked();
  return seq;
}

bool MetricRelay::OverflowsLocked(AttemptKey key, Stream& stream, std::string* overflow) {
  const int64_t bound = options_.max_memory_points + options_.max_overflow_points;
  if (!stream.spill_failed || static_cast<int64_t>(stream.points.size()) < bound) return false;
  stream.refusal = absl::StrCat(
      "the metric buffer is full: the spill file could not be written (", stream.spill_error,
      ") and ", stream.points.size(),
      " unacknowledged points wait in memory, the bound; the "
      "attempt stops here so that no point it reported is lost, and is retried from its latest "
      "checkpoint");
  LOG(ERROR) << "run " << key.run_id << " attempt " << key.attempt << ": " << stream.refusal;
  ApplyRefusalLocked(stream);
  ++generation_;
  *overflow = stream.refusal;  // the callback runs once the lock is released
  return true;
}

void MetricRelay::AddCheckpoint(AttemptKey key, v1::ReportCheckpointRequest checkpoint) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  // After an overflow the checkpoint's points are incomplete: it must not be a resume point.
  if (it == streams_.end() || it->second.stale || !it->second.refusal.empty()) return;
  checkpoint.set_run_id(key.run_id);
  checkpoint.set_attempt(key.attempt);
  it->second.checkpoints.push_back({it->second.last_seq, std::move(checkpoint)});
  ++generation_;
}

void MetricRelay::Close(AttemptKey key) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  if (it != streams_.end()) CloseLocked(it);
}

void MetricRelay::CloseLocked(std::map<AttemptKey, Stream>::iterator it) {
  if (it->second.kept) {
    std::error_code error;
    std::filesystem::remove(OutcomePath(it->first), error);
  }
  DropLocked(it->second);
  streams_.erase(it);
  ++generation_;
  UpdateGaugeLocked();
}

void MetricRelay::Finish(AttemptKey key, v1::FinishRunRequest finish) {
  absl::MutexLock lock(&mu_);
  Stream& stream = streams_[key];
  finish.set_run_id(key.run_id);
  finish.set_attempt(key.attempt);
  finish.set_last_seq(stream.last_seq + stream.lost);
  stream.finish = std::move(finish);
  ApplyRefusalLocked(stream);
  ++generation_;
}

void MetricRelay::AwaitChangeLocked(int64_t timeout_ms) {
  const int64_t generation = generation_;
  auto changed = [this, generation]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return generation_ != generation; };
  mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(timeout_ms));
}

bool MetricRelay::WaitDelivered(AttemptKey key, absl::Notification* abandon) {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto it = streams_.find(key);
    if (it == streams_.end() || it->second.stale) return false;
    if (DeliveredLocked(it->second)) return true;
    if (abandon != nullptr && abandon->HasBeenNotified()) return false;
    AwaitChangeLocked(200);
  }
}

bool MetricRelay::WaitFinished(AttemptKey key, absl::Notification* abandon) {
  absl::MutexLock lock(&mu_);
  while (streams_.count(key) > 0) {
    if (abandon != nullptr && abandon->HasBeenNotified()) return false;
    AwaitChangeLocked(200);
  }
  return true;
}

bool MetricRelay::WaitIdle(int64_t deadline_ms, absl::Notification* abandon) {
  absl::MutexLock lock(&mu_);
  while (!streams_.empty()) {
    const int64_t left = deadline_ms - clock_->MonotonicMillis();
    if (left <= 0 || (abandon != nullptr && abandon->HasBeenNotified())) return false;
    AwaitChangeLocked(std::min<int64_t>(left, 200));
  }
  return true;
}

void MetricRelay::RunPumpLoop(absl::Notification* stop) {
  while (!stop->HasBeenNotified()) {
    const bool progressed = Pump();
    absl::MutexLock lock(&mu_);
    const int64_t now = clock_->MonotonicMillis();
    int64_t wait_ms = 1000;
    for (const auto& [key, stream] : streams_) {
      if (!HasWorkLocked(stream)) continue;
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
  return it == streams_.end() ? 0 : it->second.last_seq + it->second.lost;
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

size_t MetricRelay::memory_points() const {
  absl::MutexLock lock(&mu_);
  return buffered_ - spilled_;
}

size_t MetricRelay::spilled_points() const {
  absl::MutexLock lock(&mu_);
  return spilled_;
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

std::set<std::string> MetricRelay::refused_checkpoints(AttemptKey key) const {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  return it == streams_.end() ? std::set<std::string>() : it->second.refused_checkpoints;
}

std::vector<AttemptKey> MetricRelay::open_attempts() const {
  absl::MutexLock lock(&mu_);
  std::vector<AttemptKey> keys;
  for (const auto& [key, stream] : streams_) keys.push_back(key);
  return keys;
}

std::vector<AttemptKey> MetricRelay::attempts_to_hold(int64_t max_stuck_ms) const {
  absl::MutexLock lock(&mu_);
  const int64_t now = clock_->MonotonicMillis();
  std::vector<AttemptKey> keys;
  for (const auto& [key, stream] : streams_) {
    if (!stream.stuck_since_ms || now - *stream.stuck_since_ms <= max_stuck_ms) {
      keys.push_back(key);
    }
  }
  return keys;
}

bool MetricRelay::DeliveredLocked(const Stream& stream) const {
  return !stream.stale && stream.points.empty() && stream.checkpoints.empty() &&
         (stream.spill == nullptr || stream.spill->unread() == 0);
}

bool MetricRelay::HasWorkLocked(const Stream& stream) const {
  return stream.finish.has_value() || (!stream.stale && !DeliveredLocked(stream));
}

void MetricRelay::FailedLocked(Stream& stream, const absl::Status& status) {
  if (IsUnreachable(status)) {
    stream.stuck_since_ms.reset();
  } else if (!stream.stuck_since_ms) {
    stream.stuck_since_ms = clock_->MonotonicMillis();
  }
  stream.backoff_ms = stream.backoff_ms == 0
                          ? options_.initial_backoff_ms
                          : std::min(2 * stream.backoff_ms, options_.max_backoff_ms);
  stream.next_try_ms = clock_->MonotonicMillis() + stream.backoff_ms;
  ++generation_;
}

void MetricRelay::ProgressLocked(Stream& stream) { stream.stuck_since_ms.reset(); }

void MetricRelay::ApplyRefusalLocked(Stream& stream) {
  if (stream.refusal.empty() || !stream.finish) return;
  v1::FinishRunRequest& finish = *stream.finish;
  if (absl::StrContains(finish.error(), stream.refusal)) return;
  // Not a success: points the trainer produced are missing.
  if (finish.outcome() == v1::OUTCOME_SUCCEEDED) finish.set_outcome(v1::OUTCOME_FAILED);
  finish.set_error(finish.error().empty() ? stream.refusal
                                          : absl::StrCat(stream.refusal, "; ", finish.error()));
}

void MetricRelay::UpdateGaugeLocked() {
  if (metrics_ == nullptr) return;
  metrics_->buffer_points.Set(static_cast<double>(buffered_));
  metrics_->spilled_points.Set(static_cast<double>(spilled_));
}

bool MetricRelay::MarkStale(AttemptKey key, const std::string& refusal) {
  std::function<void(AttemptKey, const std::string&)> callback;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(key);
    if (it == streams_.end() || it->second.stale) return false;
    Stream& stream = it->second;
    const size_t points = stream.points.size() + (stream.spill ? stream.spill->unread() : 0);
    if (refusal.empty()) {
      LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt << " is stale; dropping "
                   << points << " buffered points";
    } else {
      LOG(ERROR) << "run " << key.run_id << " attempt " << key.attempt << ": " << refusal
                 << "; dropping its " << points << " buffered points and "
                 << stream.checkpoints.size()
                 << " checkpoint reports, the attempt ends with that error";
      if (metrics_ != nullptr) {
        metrics_->points_dropped_refused.Increment(static_cast<double>(points));
      }
    }
    stream.stale = true;
    stream.refusal = refusal;
    ProgressLocked(stream);
    DropLocked(stream);
    stream.checkpoints.clear();
    ApplyRefusalLocked(stream);
    ++generation_;
    UpdateGaugeLocked();
    callback = on_stale_;
  }
  if (callback) callback(key, refusal);
  return true;
}

}  // namespace xmod
