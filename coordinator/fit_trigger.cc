// See fit_trigger.h.
#include "coordinator/fit_trigger.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/store_reads.h"
#include "coordinator/store_writes.h"
#include "fitter/db_source.h"
#include "glog/logging.h"

namespace xmod {
namespace {

using fitter::IsDenseReference;
using fitter::IsObservation;

// A defect no later run can repair: a succeeded run of the fit with no val/loss point, or
// with a value that is not finite and positive (a NaN, which the store keeps as text
// (store_writes.h), reads as 0 through fitter::LoadSweepRuns).
bool HasUnrepairableInput(const std::vector<fitter::RunCurve>& runs) {
  for (const fitter::RunCurve& run : runs) {
    if (!IsDenseReference(run) && !IsObservation(run)) continue;
    if (run.points.empty()) return true;
    for (const fitter::CurvePoint& p : run.points) {
      if (!(p.flops > 0) || !(p.loss > 0) || !std::isfinite(p.flops) || !std::isfinite(p.loss)) {
        return true;
      }
    }
  }
  return false;
}

// While a sweep runs: the sparse runs whose dense group has no succeeded reference yet are
// left out (their reference is still coming). Returns how many were dropped.
int DropSparseWithoutDense(std::vector<fitter::RunCurve>* runs) {
  std::set<std::pair<int, std::string>> dense;
  for (const fitter::RunCurve& run : *runs) {
    if (IsDenseReference(run)) dense.insert({run.seq_len, run.backbone});
  }
  const size_t before = runs->size();
  runs->erase(
      std::remove_if(runs->begin(), runs->end(),
                     [&](const fitter::RunCurve& run) {
                       return IsObservation(run) && !dense.count({run.seq_len, run.backbone});
                     }),
      runs->end());
  return static_cast<int>(before - runs->size());
}

}  // namespace

FitTrigger::FitTrigger(Store* store, Clock* clock, prometheus::Registry* registry,
                       FitTriggerOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {
  if (registry != nullptr) {
    auto& fits = prometheus::BuildCounter()
                     .Name("xmod_fits_total")
                     .Help("Scaling-law fit attempts stored (ok) or failed (error)")
                     .Register(*registry);
    fits_ok_ = &fits.Add({{"result", "ok"}});
    fits_error_ = &fits.Add({{"result", "error"}});
    fit_seconds_ =
        &prometheus::BuildHistogram()
             .Name("xmod_fit_seconds")
             .Help("Wall time of one sweep fit (two-stage fit, cross-validation, bootstrap)")
             .Register(*registry)
             .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30,
                                                              100, 300, 1000});
  }
  thread_ = std::thread([this] { Loop(); });
}

FitTrigger::~FitTrigger() { Shutdown(); }

void FitTrigger::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queue_.clear();
    queued_.clear();
    running_pending_ = false;
    cancel_running_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int FitTrigger::attempts() const {
  absl::MutexLock lock(&mu_);
  return attempts_;
}

void FitTrigger::RequestFit(int64_t sweep_id) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  if (running_ == sweep_id) {
    running_pending_ = true;
  } else if (queued_.insert(sweep_id).second) {
    queue_.push_back(sweep_id);
  }
}

void FitTrigger::CancelFit(int64_t sweep_id) {
  absl::MutexLock lock(&mu_);
  if (queued_.erase(sweep_id) > 0) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), sweep_id));
  }
  if (running_ == sweep_id) {
    running_pending_ = false;
    cancel_running_ = true;
  }
}

void FitTrigger::WaitIdle() {
  absl::MutexLock lock(&mu_);
  const auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue_.empty() && running_ == 0;
  };
  mu_.Await(absl::Condition(&idle));
}

void FitTrigger::Loop() {
  while (true) {
    int64_t sweep_id = 0;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      sweep_id = queue_.front();
      queue_.pop_front();
      queued_.erase(sweep_id);
      running_ = sweep_id;
      running_pending_ = false;
      cancel_running_ = false;
    }
    if (options_.TEST_before_fit) options_.TEST_before_fit(sweep_id);
    FitOnce(sweep_id);
    absl::MutexLock lock(&mu_);
    // A request that came while the fit ran gets exactly one more fit, behind the others.
    if (running_pending_ && !stopping_ && queued_.insert(sweep_id).second) {
      queue_.push_back(sweep_id);
    }
    running_pending_ = false;
    running_ = 0;
  }
}

absl::Status FitTrigger::Poll() {
  absl::MutexLock poll_lock(&poll_mu_);
  struct Row {
    int64_t sweep_id;
    int64_t succeeded;
    int64_t last_finished_ms;
    int64_t last_fit_ms;  // -1 = no fits row
  };
  std::vector<Row> rows;
  std::map<int64_t, bool> new_sweeps;  // sweep -> fit.enabled, for sweeps not seen before
  absl::Status read = store_->Read([&](Db& db) {
    absl::StatusOr<Stmt> stmt = db.Prepare(
        "SELECT r.sweep_id, COUNT(*), MAX(r.finished_ms),"
        " (SELECT MAX(f.created_ms) FROM fits f WHERE f.sweep_id = r.sweep_id)"
        " FROM runs r WHERE r.state = 'SUCCEEDED' GROUP BY r.sweep_id");
    if (!stmt.ok()) return stmt.status();
    while (true) {
      absl::StatusOr<bool> row = stmt->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      rows.push_back(
          {stmt->Int(0), stmt->Int(1), stmt->Int(2), stmt->IsNull(3) ? -1 : stmt->Int(3)});
    }
    for (const Row& r : rows) {
      if (seen_.count(r.sweep_id)) continue;
      absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, r.sweep_id);
      if (!sweep.ok()) return sweep.status();
      new_sweeps[r.sweep_id] = sweep->spec().fit().enabled();
    }
    return absl::OkStatus();
  });
  if (!read.ok()) return read;
  const bool first = !polled_;
  polled_ = true;
  for (const Row& r : rows) {
    auto [it, inserted] = seen_.try_emplace(r.sweep_id);
    SweepSeen& seen = it->second;
    if (inserted) seen.fit_enabled = new_sweeps[r.sweep_id];
    const bool changed = seen.succeeded != r.succeeded;
    seen.succeeded = r.succeeded;
    if (!seen.fit_enabled) continue;
    // At start, only what the stored fits do not cover yet; later, every change.
    const bool stale = r.last_fit_ms < 0 || r.last_finished_ms > r.last_fit_ms;
    if (first ? stale : changed) RequestFit(r.sweep_id);
  }
  return absl::OkStatus();
}

void FitTrigger::FitOnce(int64_t sweep_id) {
  {
    absl::MutexLock lock(&mu_);
    ++attempts_;
  }
  const auto count_error = [this] {
    if (fits_error_ != nullptr) fits_error_->Increment();
  };
  xmod::v1::Sweep sweep;
  absl::Status read = store_->Read([&](Db& db) {
    absl::StatusOr<xmod::v1::Sweep> s = LoadSweep(db, sweep_id);
    if (!s.ok()) return s.status();
    sweep = *std::move(s);
    return absl::OkStatus();
  });
  if (absl::IsNotFound(read)) return;
  if (!read.ok()) {
    LOG(WARNING) << "fit of sweep " << sweep_id << ": " << read;
    count_error();
    return;
  }
  const xmod::v1::FitPlan& plan = sweep.spec().fit();
  if (!plan.enabled()) return;
  const bool active = sweep.state() == xmod::v1::SWEEP_ACTIVE;

  absl::StatusOr<std::vector<fitter::RunCurve>> runs =
      fitter::LoadSweepRuns(store_->path(), sweep_id);
  if (!runs.ok()) {
    LOG(WARNING) << "fit of sweep " << sweep_id << ": " << runs.status();
    count_error();
    return;
  }
  if (active) {
    if (int dropped = DropSparseWithoutDense(&*runs); dropped > 0) {
      VLOG(1) << "fit of sweep " << sweep_id << ": " << dropped
              << " sparse runs wait for their dense reference";
    }
  }

  fitter::SweepFitOptions options = options_.fit;
  options.fit.search.seed = plan.seed();
  options.fit.search.cancel = &cancel_running_;
  options.bootstrap_samples =
      std::clamp(plan.bootstrap_samples(), 0, options_.max_bootstrap_samples);
  if (options.bootstrap_samples != plan.bootstrap_samples()) {
    LOG(WARNING) << "sweep " << sweep_id << ": fit.bootstrap_samples " << plan.bootstrap_samples()
                 << " clamped to " << options.bootstrap_samples;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<fitter::FitReport> report = fitter::FitSweep(*runs, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (absl::IsCancelled(report.status())) {
    LOG(INFO) << "sweep " << sweep_id << ": fit cancelled after " << seconds << " s";
    return;
  }

  xmod::v1::Fit fit;
  if (report.ok()) {
    fit = fitter::ToFitProto(*report);
  } else if (active && !HasUnrepairableInput(*runs)) {
    LOG(INFO) << "sweep " << sweep_id << ": not enough data to fit yet ("
              << report.status().message() << ")";
    return;
  } else {
    fit.set_error(std::string(report.status().message()));
  }
  if (fit_seconds_ != nullptr) fit_seconds_->Observe(seconds);
  fit.set_sweep_id(sweep_id);
  fit.set_created_unix_ms(clock_->NowMillis());
  if (absl::Status s = StoreFit(fit); !s.ok()) {
    LOG(WARNING) << "fit of sweep " << sweep_id << ": storing it: " << s;
    count_error();
    return;
  }
  if (fit.error().empty()) {
    if (fits_ok_ != nullptr) fits_ok_->Increment();
    LOG(INFO) << "sweep " << sweep_id << ": fitted " << fit.n_obs() << " observations, R²_Δ "
              << fit.r2() << ", RMSE " << fit.rmse() << " (" << seconds << " s)";
  } else {
    count_error();
    LOG(WARNING) << "sweep " << sweep_id << ": fit failed: " << fit.error();
  }
}

absl::Status FitTrigger::StoreFit(const xmod::v1::Fit& fit) {
  return store_->WriteAndWait([&fit](Db& db) { return InsertFit(db, fit).status(); });
}

}  // namespace xmod
