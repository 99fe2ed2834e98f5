// See metric_relay.h. This file: the spill folder — points spilled past the memory bound and
// read back, the attempts a drain keeps for the next start (Keep) and their replay at start.
#include <algorithm>
#include <deque>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "glog/logging.h"
#include "worker/metric_relay.h"
#include "worker/spill_file.h"
#include "xmod/v1/worker_spill.pb.h"

namespace xmod {
namespace {

constexpr char kSpillSuffix[] = ".spill";
constexpr char kOutcomeSuffix[] = ".outcome";

// Every unacknowledged point, in order: those in memory (seq acked_seq + 1 on), then those
// still on disk in `spill` (if any), into a fresh spill file at `path`.
absl::Status WriteUnacknowledged(const std::string& path, int64_t acked_seq,
                                 const std::deque<v1::MetricPoint>& points, SpillFile* spill) {
  absl::StatusOr<std::unique_ptr<SpillFile>> fresh = SpillFile::Create(path + ".tmp");
  if (!fresh.ok()) return fresh.status();
  int64_t seq = acked_seq;
  for (const v1::MetricPoint& point : points) {
    if (absl::Status s = (*fresh)->Append(++seq, point, /*durable=*/false); !s.ok()) return s;
  }
  v1::MetricPoint point;
  while (spill != nullptr) {
    absl::StatusOr<bool> read = spill->ReadNext(&seq, &point);
    if (!read.ok()) return read.status();
    if (!*read) break;
    if (absl::Status s = (*fresh)->Append(seq, point, /*durable=*/false); !s.ok()) return s;
  }
  // The rename replaces the old file at `path` (if any), which must then not be deleted.
  return (*fresh)->Persist(path);
}

}  // namespace

void MetricRelay::LoadSpillFolderLocked() {
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
    if (absl::Status s = WriteUnacknowledged(SpillPath(key), stream.acked_seq, stream.points,
                                             stream.spill.get());
        !s.ok()) {
      return s;
    }
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
      stream.spill_error = std::string(file.status().message());
      return false;
    }
    stream.spill = *std::move(file);
  }
  if (absl::Status s = stream.spill->Append(seq, point, /*durable=*/true); !s.ok()) {
    LOG(ERROR) << "run " << key.run_id << " attempt " << key.attempt << ": spilling: " << s
               << "; its points stay in memory";
    stream.spill_error = std::string(s.message());
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

}  // namespace xmod
