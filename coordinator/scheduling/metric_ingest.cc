// See metric_ingest.h.
#include "coordinator/scheduling/metric_ingest.h"

#include <algorithm>
#include <future>
#include <utility>

#include "coordinator/store/store_writes.h"
#include "trainer_contract/series.h"

namespace xmod {
namespace {

using scheduling::AttemptKey;

// Progress from a batch: the position of its furthest point and the latest value of each
// name shown as progress.
xmod::v1::Progress ProgressOf(const xmod::v1::ReportMetricsRequest& request) {
  xmod::v1::Progress progress;
  const xmod::v1::MetricPoint* furthest = &request.points(0);
  for (const xmod::v1::MetricPoint& p : request.points()) {
    if (p.step() >= furthest->step()) furthest = &p;
    if (p.name() == SeriesName(xmod::v1::SERIES_TRAIN_LOSS)) progress.set_train_loss(p.value());
    if (p.name() == SeriesName(xmod::v1::SERIES_VAL_LOSS)) progress.set_val_loss(p.value());
    if (p.name() == SeriesName(xmod::v1::SERIES_TOKENS_PER_SECOND))
      progress.set_tokens_per_second(p.value());
  }
  progress.set_step(furthest->step());
  progress.set_tokens(furthest->tokens());
  progress.set_flops(furthest->flops());
  return progress;
}

}  // namespace

MetricIngest::MetricIngest(Store* store, ChangeFeed* feed, CoordinatorMetrics* metrics,
                           int max_writes)
    : store_(store), feed_(feed), metrics_(metrics), max_writes_(std::max(1, max_writes)) {}

void MetricIngest::Open(const AttemptKey& key, LiveAttempt attempt) {
  absl::MutexLock lock(&mu_);
  attempts_[key] = Entry{std::move(attempt)};
}

bool MetricIngest::BeginClose(const std::vector<AttemptKey>& keys) {
  absl::MutexLock lock(&mu_);
  bool writing = false;
  for (const AttemptKey& key : keys) {
    auto it = attempts_.find(key);
    if (it == attempts_.end()) continue;
    it->second.closing = true;
    writing = writing || it->second.writing > 0;
  }
  return writing;
}

void MetricIngest::EndClose(const std::vector<AttemptKey>& keys, bool committed) {
  if (keys.empty()) return;
  absl::MutexLock lock(&mu_);
  for (const AttemptKey& key : keys) {
    auto it = attempts_.find(key);
    if (it == attempts_.end()) continue;
    if (committed) {
      attempts_.erase(it);
    } else {
      it->second.closing = false;
    }
  }
  close_resolved_.SignalAll();
}

void MetricIngest::MarkCancelled(const AttemptKey& key) {
  absl::MutexLock lock(&mu_);
  if (auto it = attempts_.find(key); it != attempts_.end()) it->second.cancelled = true;
}

int64_t MetricIngest::AckedSeq(const AttemptKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find(key);
  return it == attempts_.end() ? -1 : it->second.attempt.acked_seq;
}

int MetricIngest::WaitingForClose() {
  absl::MutexLock lock(&mu_);
  return waiting_for_close_;
}

int MetricIngest::WritesInFlight() {
  absl::MutexLock lock(&mu_);
  return writes_;
}

MetricIngest::Entry* MetricIngest::AwaitReporterLocked(
    const xmod::v1::ReportMetricsRequest& request) {
  const AttemptKey key{request.run_id(), request.attempt()};
  const bool writes = request.points_size() > 0;
  std::map<AttemptKey, Entry>::iterator it;
  while (true) {
    while (writes && writes_ >= max_writes_) write_done_.Wait(&mu_);
    it = attempts_.find(key);
    if (it == attempts_.end() || !it->second.closing) break;
    ++waiting_for_close_;
    close_resolved_.Wait(&mu_);
    --waiting_for_close_;
  }
  if (it == attempts_.end() || it->second.attempt.reporter != request.worker_id()) return nullptr;
  return &it->second;
}

void MetricIngest::NoteStoredLocked(const xmod::v1::ReportMetricsRequest& request, int64_t acked,
                                    const xmod::v1::Progress& progress) {
  auto it = attempts_.find({request.run_id(), request.attempt()});
  if (it != attempts_.end()) {
    it->second.attempt.acked_seq = std::max(it->second.attempt.acked_seq, acked);
  }
  if (metrics_ == nullptr) return;
  metrics_->AddMetricPoints(request.points_size());
  // Only while the run runs: an attempt closing or closed may have removed its series.
  if (it != attempts_.end() && !it->second.closing && !it->second.cancelled) {
    metrics_->SetRunProgress(it->second.attempt.run_name, progress.flops(), progress.train_loss());
  }
}

absl::StatusOr<xmod::v1::ReportMetricsResponse> MetricIngest::ReportMetrics(
    const xmod::v1::ReportMetricsRequest& request) {
  if (request.first_seq() < 0) return absl::InvalidArgumentError("first_seq: must be >= 0");
  const int n = request.points_size();
  const int64_t last_seq = request.first_seq() + n - 1;
  xmod::v1::ReportMetricsResponse response;
  int64_t acked = 0;
  int64_t sweep_id = 0;
  xmod::v1::Progress progress;
  std::future<absl::Status> done;
  {
    absl::MutexLock lock(&mu_);
    Entry* entry = AwaitReporterLocked(request);
    if (entry == nullptr) {
      response.set_stale(true);
      response.set_acked_seq(std::max<int64_t>(last_seq, request.first_seq() - 1));
      return response;
    }
    if (entry->cancelled) response.set_stale(true);
    const int64_t durable = entry->attempt.acked_seq;
    if (n == 0) {
      response.set_acked_seq(durable);
      return response;
    }
    acked = durable;
    if (durable < 0 || request.first_seq() <= durable + 1) acked = std::max(durable, last_seq);
    progress = ProgressOf(request);
    sweep_id = entry->attempt.sweep_id;
    // Counted under this lock, so an end of the attempt queues behind it (header comment).
    ++writes_;
    ++entry->writing;
    // The request outlives the write: this thread waits for it below, and the store runs a
    // closure before it fulfils the closure's future (or never runs it).
    done = store_->WriteBulk([&request, &progress](Db& db) {
      if (absl::Status s = InsertMetrics(db, request.run_id(), request.attempt(),
                                         request.first_seq(), request.points());
          !s.ok()) {
        return s;
      }
      return UpdateProgress(db, request.run_id(), progress);
    });
  }
  const absl::Status stored = done.get();
  {
    absl::MutexLock lock(&mu_);
    --writes_;
    write_done_.Signal();
    // Gone when an end of the attempt, queued behind this batch, was committed and applied
    // (EndClose) before this thread got the lock back.
    if (auto it = attempts_.find({request.run_id(), request.attempt()}); it != attempts_.end()) {
      --it->second.writing;
    }
    if (stored.ok()) NoteStoredLocked(request, acked, progress);
  }
  if (!stored.ok()) return stored;
  feed_->Publish(sweep_id, request.run_id());
  response.set_acked_seq(acked);
  return response;
}

}  // namespace xmod
