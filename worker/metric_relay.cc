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
#include "xmod/v1/worker_spill.pb.h"

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

// The call did not reach the coordinator (or its answer did not come back).
bool IsUnreachable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

constexpr char kSpillSuffix[] = ".spill";
constexpr char kOutcomeSuffix[] = ".outcome";

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
  std::error_code error;
  std::vector<std::string> others;
  for (const auto& entry : std::filesystem::directory_iterator(options_.spill_dir, error)) {
    const std::string path = entry.path().string();
    if (absl::EndsWith(path, kOutcomeSuffix)) {
      LoadKeptLocked(path);
    } else if (absl::StrContains(entry.path().filename().string(), kSpillSuffix) ||
               absl::StrContains(entry.path().filename().string(), kOutcomeSuffix)) {
      others.push_back(path);  // a spill file, or a temporary file of Keep
    }
  }
  for (const std::string& path : others) {
    bool kept = false;
    for (const auto& [key, stream] : streams_) kept = kept || path == SpillPath(key);
    if (kept) continue;
    LOG(WARNING) << "deleting " << path << ", left by an earlier run of this worker that died";
    std::filesystem::remove(path, error);
  }
  UpdateGaugeLocked();
}

MetricRelay::~MetricRelay() = default;

std::string MetricRelay::SpillPath(AttemptKey key) const {
  return absl::StrCat(options_.spill_dir, "/run-", key.run_id, "-a", key.attempt, kSpillSuffix);
}

std::string MetricRelay::OutcomePath(AttemptKey key) const {
  return absl::StrCat(options_.spill_dir, "/run-", key.run_id, "-a", key.attempt, kOutcomeSuffix);
}

void MetricRelay::LoadKeptLocked(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  v1::KeptAttempt kept;
  if (!text.ok() || !kept.ParseFromString(*text) ||
      OutcomePath({kept.finish().run_id(), kept.finish().attempt()}) != path) {
    LOG(ERROR) << "deleting " << path << ": not an outcome file this worker wrote";
    std::error_code error;
    std::filesystem::remove(path, error);
    return;
  }
  const AttemptKey key{kept.finish().run_id(), kept.finish().attempt()};
  Stream& stream = streams_[key];
  stream.kept = true;
  stream.acked_seq = kept.acked_seq();
  stream.last_seq = kept.acked_seq();
  for (const v1::KeptAttempt::Checkpoint& checkpoint : kept.checkpoints()) {
    stream.checkpoints.push_back({checkpoint.after_seq(), checkpoint.request()});
  }
  stream.finish = kept.finish();
  if (std::filesystem::exists(SpillPath(key))) {
    absl::StatusOr<std::unique_ptr<SpillFile>> spill = SpillFile::Open(SpillPath(key));
    if (spill.ok()) {
      stream.spill = *std::move(spill);
      // Its records are consecutive. Those up to acked_seq were acknowledged after it was
      // written (a later keep wrote the outcome file but could not replace this one).
      const int64_t skip = std::clamp<int64_t>(
          stream.acked_seq - (stream.spill->last_seq() - stream.spill->unread()), 0,
          stream.spill->unread());
      for (int64_t i = 0; i < skip; ++i) {
        int64_t seq = 0;
        v1::MetricPoint point;
        if (!stream.spill->ReadNext(&seq, &point).ok()) break;  // RefillLocked counts the loss
      }
      const int64_t unread = stream.spill->unread();
      stream.last_seq += unread;
      buffered_ += unread;
      spilled_ += unread;
      RefillLocked(stream, /*all=*/false);
    } else {
      LOG(ERROR) << spill.status() << ": its points are lost";
    }
  }
  LOG(INFO) << "run " << key.run_id << " attempt " << key.attempt
            << ": replaying what an earlier run of this worker kept: "
            << stream.last_seq - stream.acked_seq << " metric points, " << stream.checkpoints.size()
            << " checkpoint reports and its FinishRun ("
            << v1::Outcome_Name(kept.finish().outcome()) << ")";
}

absl::Status MetricRelay::KeepLocked(AttemptKey key, Stream& stream) {
  v1::KeptAttempt kept;
  kept.set_acked_seq(stream.acked_seq);
  for (const PendingCheckpoint& checkpoint : stream.checkpoints) {
    v1::KeptAttempt::Checkpoint* c = kept.add_checkpoints();
    c->set_after_seq(checkpoint.after_seq);
    *c->mutable_request() = checkpoint.request;
  }
  *kept.mutable_finish() = *stream.finish;
  const std::string outcome = kept.SerializeAsString();
  // The outcome file says its spill file is complete, so it is written after it; but a kept
  // attempt's outcome file of an earlier life is already there, next to the spill file it
  // describes: its new one goes first. Whatever fails then, the pair on disk is consistent
  // (a spill file that starts before acked_seq + 1 has its acknowledged records skipped at
  // load).
  if (stream.kept) {
    if (absl::Status s = WriteFileAtomic(OutcomePath(key), outcome); !s.ok()) return s;
  }
  if (!stream.points.empty() || (stream.spill != nullptr && stream.spill->unread() > 0)) {
    // Every unacknowledged point, in order: those in memory, then those still on disk.
    const std::string path = SpillPath(key);
    absl::StatusOr<std::unique_ptr<SpillFile>> fresh = SpillFile::Create(path + ".tmp");
    if (!fresh.ok()) return fresh.status();
    int64_t seq = stream.acked_seq;
    for (const v1::MetricPoint& point : stream.points) {
      if (absl::Status s = (*fresh)->Append(++seq, point, /*durable=*/false); !s.ok()) return s;
    }
    v1::MetricPoint point;
    while (stream.spill != nullptr) {
      absl::StatusOr<bool> read = stream.spill->ReadNext(&seq, &point);
      if (!read.ok()) return read.status();
      if (!*read) break;
      if (absl::Status s = (*fresh)->Append(seq, point, /*durable=*/false); !s.ok()) return s;
    }
    // The rename replaces the old file at `path` (if any), which must then not be deleted.
    if (absl::Status s = (*fresh)->Persist(path); !s.ok()) return s;
    if (stream.spill != nullptr) stream.spill->Release();
    stream.spill.reset();
  }
  return stream.kept ? absl::OkStatus() : WriteFileAtomic(OutcomePath(key), outcome);
}

bool MetricRelay::SpillLocked(AttemptKey key, Stream& stream, int64_t seq,
                              const v1::MetricPoint& point) {
  if (stream.spill == nullptr) {
    absl::StatusOr<std::unique_ptr<SpillFile>> file = SpillFile::Create(SpillPath(key));
    if (!file.ok()) {
      LOG(ERROR) << "run " << key.run_id << " attempt " << key.attempt << ": " << file.status()
                 << "; its points stay in memory";
      return false;
    }
    stream.spill = *std::move(file);
  }
  if (absl::Status s = stream.spill->Append(seq, point, /*durable=*/true); !s.ok()) {
    LOG(ERROR) << "run " << key.run_id << " attempt " << key.attempt << ": spilling: " << s
               << "; its points stay in memory";
    return false;
  }
  return true;
}

void MetricRelay::RefillLocked(Stream& stream, bool all) {
  while (stream.spill != nullptr && stream.spill->unread() > 0 &&
         (all || static_cast<int64_t>(stream.points.size()) < options_.max_memory_points)) {
    int64_t seq = 0;
    v1::MetricPoint point;
    absl::StatusOr<bool> read = stream.spill->ReadNext(&seq, &point);
    const int64_t expected = stream.acked_seq + static_cast<int64_t>(stream.points.size()) + 1;
    if (!read.ok() || !*read || seq != expected) {
      // Cannot happen short of a failing disk. The lost points are counted in last_seq(), so
      // the coordinator does not take the attempt for complete.
      const int64_t lost = stream.spill->unread();
      LOG(ERROR) << "metric spill file unreadable ("
                 << (read.ok() ? "out of order" : read.status().ToString()) << "): " << lost
                 << " points lost";
      stream.lost += lost;
      stream.last_seq -= lost;
      spilled_ -= lost;
      buffered_ -= lost;
      stream.spill.reset();
      stream.spill_failed = true;
      break;
    }
    stream.points.push_back(std::move(point));
    --spilled_;
  }
  if (stream.spill != nullptr && stream.spill->unread() == 0 &&
      stream.acked_seq >= stream.spill->last_seq()) {
    stream.spill.reset();  // every point it held is acknowledged: delete it
  }
}

void MetricRelay::DropLocked(Stream& stream) {
  const size_t unread = stream.spill == nullptr ? 0 : stream.spill->unread();
  buffered_ -= stream.points.size() + unread;
  spilled_ -= unread;
  stream.points.clear();
  stream.spill.reset();
}

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
  absl::MutexLock lock(&mu_);
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

int MetricRelay::Keep() {
  absl::MutexLock lock(&mu_);
  int kept = 0;
  for (auto& [key, stream] : streams_) {
    const int64_t points = static_cast<int64_t>(stream.points.size()) +
                           (stream.spill == nullptr ? 0 : stream.spill->unread());
    if (!stream.finish) {
      LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt
                   << " is still open without a FinishRun: dropping its " << points
                   << " undelivered points";
      continue;
    }
    absl::Status status = options_.spill_dir.empty()
                              ? absl::FailedPreconditionError("no spill folder")
                              : KeepLocked(key, stream);
    if (!status.ok()) {
      LOG(ERROR) << "run " << key.run_id << " attempt " << key.attempt
                 << ": cannot keep its undelivered reports: " << status
                 << (stream.kept ? "; the next start replays what an earlier run kept of it" : "");
      // An earlier life's spill file stays next to the outcome file (KeepLocked).
      if (stream.kept && stream.spill != nullptr) stream.spill->Release();
      continue;
    }
    LOG(INFO) << "run " << key.run_id << " attempt " << key.attempt << ": kept " << points
              << " undelivered metric points, " << stream.checkpoints.size()
              << " checkpoint reports and its FinishRun in " << options_.spill_dir
              << " for the next start";
    ++kept;
  }
  streams_.clear();
  buffered_ = 0;
  spilled_ = 0;
  ++generation_;
  UpdateGaugeLocked();
  return kept;
}

bool MetricRelay::Pump() {
  struct Work {
    AttemptKey key;
    std::vector<v1::ReportCheckpointRequest> checkpoints;
    v1::ReportMetricsRequest metrics;
    std::optional<v1::FinishRunRequest> finish;  // only once everything else is delivered
  };
  std::vector<Work> work;
  {
    absl::MutexLock lock(&mu_);
    const int64_t now = clock_->MonotonicMillis();
    for (auto& [key, stream] : streams_) {
      if (stream.next_try_ms > now || !HasWorkLocked(stream)) continue;
      Work w{key, {}, {}, std::nullopt};
      if (stream.finish && (stream.stale || DeliveredLocked(stream))) {
        w.finish = *stream.finish;
        w.finish->set_worker_id(worker_id_);
        w.finish->set_last_acked_seq(stream.acked_seq);
        work.push_back(std::move(w));
        continue;
      }
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
    if (w.finish) {
      progressed = SendFinish(w.key, *w.finish) || progressed;
      continue;
    }
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
      if (!reply.ok() && IsFinalRefusal(reply.status())) {
        // Retrying cannot help, and would hold back every later report of the attempt.
        LOG(ERROR) << "run " << w.key.run_id << " attempt " << w.key.attempt
                   << ": the coordinator refused checkpoint " << cp.path()
                   << " for good, dropped: " << reply.status();
        it->second.refused_checkpoints.insert(cp.path());
      } else if (!reply.ok()) {
        LOG(WARNING) << "run " << w.key.run_id << " attempt " << w.key.attempt
                     << ": ReportCheckpoint failed, will retry: " << reply.status();
        FailedLocked(it->second, reply.status());
        failed = true;
        break;
      }
      it->second.checkpoints.pop_front();
      it->second.backoff_ms = 0;
      ProgressLocked(it->second);
      ++generation_;
      progressed = true;
    }
    if (failed || w.metrics.points_size() == 0) continue;

    absl::StatusOr<v1::ReportMetricsResponse> reply = gateway_->ReportMetrics(w.metrics);
    if ((!reply.ok() && IsStaleError(reply.status())) || (reply.ok() && reply->stale())) {
      MarkStale(w.key);
      continue;
    }
    if (!reply.ok() && IsFinalRefusal(reply.status())) {
      // Later points cannot be stored past the gap this batch would leave: the attempt ends.
      MarkStale(w.key, absl::StrCat("the coordinator refused metric points ", w.metrics.first_seq(),
                                    "..", w.metrics.first_seq() + w.metrics.points_size() - 1,
                                    " for good: ", reply.status().ToString()));
      continue;
    }
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(w.key);
    if (it == streams_.end()) continue;
    Stream& stream = it->second;
    if (!reply.ok()) {
      LOG(WARNING) << "run " << w.key.run_id << " attempt " << w.key.attempt
                   << ": ReportMetrics failed, will retry: " << reply.status();
      FailedLocked(stream, reply.status());
      continue;
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
      LOG(WARNING) << "run " << w.key.run_id << " attempt " << w.key.attempt
                   << ": ReportMetrics acknowledged none of seqs from " << w.metrics.first_seq()
                   << ", will retry";
      FailedLocked(stream, absl::UnknownError("no point acknowledged"));
    }
    RefillLocked(stream, /*all=*/false);
    relayed_ += dropped;
    if (metrics_ != nullptr) metrics_->points_relayed.Increment(static_cast<double>(dropped));
    UpdateGaugeLocked();
    ++generation_;
    if (dropped > 0) progressed = true;
  }
  return progressed;
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
