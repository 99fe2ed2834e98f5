#include "worker/metric_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "glog/logging.h"

namespace xmod {

// One attempt's spill file: append-only records (4-byte little-endian length, 8-byte
// little-endian seq, a serialized MetricPoint), each made durable before Append returns,
// read back in order. Deleted when destroyed. Not thread-safe (the relay's mutex guards it).
class SpillFile {
 public:
  static absl::StatusOr<std::unique_ptr<SpillFile>> Create(const std::string& path) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
    }
    return std::unique_ptr<SpillFile>(new SpillFile(path, fd));
  }
  ~SpillFile() {
    close(fd_);
    unlink(path_.c_str());
  }

  absl::Status Append(int64_t seq, const v1::MetricPoint& point) {
    const std::string body = point.SerializeAsString();
    std::string record(12, '\0');
    PutLittleEndian(static_cast<uint64_t>(body.size()), 4, &record[0]);
    PutLittleEndian(static_cast<uint64_t>(seq), 8, &record[4]);
    record += body;
    size_t done = 0;
    while (done < record.size()) {
      const ssize_t n = pwrite(fd_, record.data() + done, record.size() - done, size_ + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Failed("write");
      done += static_cast<size_t>(n);
    }
    if (fdatasync(fd_) != 0) return Failed("fdatasync");
    size_ += static_cast<int64_t>(record.size());
    ++written_;
    last_seq_ = seq;
    return absl::OkStatus();
  }

  // The next unread record; false when every record was read.
  absl::StatusOr<bool> ReadNext(int64_t* seq, v1::MetricPoint* point) {
    if (read_ == written_) return false;
    char header[12];
    if (!ReadAt(offset_, header, sizeof(header))) return Failed("read");
    const uint64_t length = GetLittleEndian(header, 4);
    std::string body(length, '\0');
    if (!ReadAt(offset_ + 12, body.data(), length) || !point->ParseFromString(body)) {
      return absl::DataLossError(absl::StrCat(path_, ": unreadable record at ", offset_));
    }
    *seq = static_cast<int64_t>(GetLittleEndian(header + 4, 8));
    offset_ += 12 + static_cast<int64_t>(length);
    ++read_;
    return true;
  }

  int64_t unread() const { return written_ - read_; }
  int64_t last_seq() const { return last_seq_; }

 private:
  SpillFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  static void PutLittleEndian(uint64_t value, int bytes, char* out) {
    for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  }
  static uint64_t GetLittleEndian(const char* in, int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
    return value;
  }
  bool ReadAt(int64_t offset, char* out, size_t n) {
    size_t done = 0;
    while (done < n) {
      const ssize_t got = pread(fd_, out + done, n - done, offset + done);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      done += static_cast<size_t>(got);
    }
    return true;
  }
  absl::Status Failed(const char* what) {
    const std::string reason = strerror(errno);
    if (ftruncate(fd_, size_) != 0) {
      // The torn tail stays; nothing reads past size_.
    }
    return absl::UnavailableError(absl::StrCat(what, " ", path_, ": ", reason));
  }

  const std::string path_;
  const int fd_;
  int64_t size_ = 0;    // bytes of complete records
  int64_t offset_ = 0;  // of the next unread record
  int64_t written_ = 0;
  int64_t read_ = 0;
  int64_t last_seq_ = 0;
};

namespace {

// The coordinator no longer accepts reports for the attempt.
bool IsStaleError(const absl::Status& status) {
  return absl::IsNotFound(status) || absl::IsFailedPrecondition(status);
}

constexpr char kSpillSuffix[] = ".spill";

}  // namespace

MetricRelay::MetricRelay(GatewayClient* gateway, Clock* clock, MetricRelayOptions options,
                         WorkerMetrics* metrics)
    : gateway_(gateway), clock_(clock), options_(std::move(options)), metrics_(metrics) {
  if (options_.spill_dir.empty()) return;
  if (absl::Status s = MakeDirs(options_.spill_dir); !s.ok()) {
    LOG(ERROR) << "metric spill folder: " << s << "; points stay in memory";
    return;
  }
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(options_.spill_dir, error)) {
    const std::string path = entry.path().string();
    if (path.size() > sizeof(kSpillSuffix) - 1 &&
        path.compare(path.size() - (sizeof(kSpillSuffix) - 1), std::string::npos, kSpillSuffix) ==
            0) {
      LOG(WARNING) << "deleting " << path << ", left by an earlier run of this worker";
      std::filesystem::remove(entry.path(), error);
    }
  }
}

MetricRelay::~MetricRelay() = default;

std::string MetricRelay::SpillPath(AttemptKey key) const {
  return absl::StrCat(options_.spill_dir, "/run-", key.run_id, "-a", key.attempt, kSpillSuffix);
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
  if (absl::Status s = stream.spill->Append(seq, point); !s.ok()) {
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
  if (it == streams_.end()) return;
  DropLocked(it->second);
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
    const int64_t now = clock_->MonotonicMillis();
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
    // Only points held in memory were sent.
    const int64_t in_memory = stream.acked_seq + static_cast<int64_t>(stream.points.size());
    int64_t acked = std::clamp(reply->acked_seq(), stream.acked_seq, in_memory);
    int64_t dropped = acked - stream.acked_seq;
    for (int64_t i = 0; i < dropped; ++i) stream.points.pop_front();
    stream.acked_seq = acked;
    stream.backoff_ms = 0;
    buffered_ -= dropped;
    RefillLocked(stream, /*all=*/false);
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
    const int64_t now = clock_->MonotonicMillis();
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

bool MetricRelay::DeliveredLocked(const Stream& stream) const {
  return !stream.stale && stream.points.empty() && stream.checkpoints.empty() &&
         (stream.spill == nullptr || stream.spill->unread() == 0);
}

void MetricRelay::FailedLocked(Stream& stream) {
  stream.backoff_ms = stream.backoff_ms == 0
                          ? options_.initial_backoff_ms
                          : std::min(2 * stream.backoff_ms, options_.max_backoff_ms);
  stream.next_try_ms = clock_->MonotonicMillis() + stream.backoff_ms;
  ++generation_;
}

void MetricRelay::UpdateGaugeLocked() {
  if (metrics_ == nullptr) return;
  metrics_->buffer_points.Set(static_cast<double>(buffered_));
  metrics_->spilled_points.Set(static_cast<double>(spilled_));
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
    DropLocked(stream);
    stream.checkpoints.clear();
    ++generation_;
    UpdateGaugeLocked();
    callback = on_stale_;
  }
  if (callback) callback(key);
  return true;
}

}  // namespace xmod
