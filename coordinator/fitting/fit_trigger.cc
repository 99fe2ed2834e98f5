// See fit_trigger.h.
#include "coordinator/fitting/fit_trigger.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/fitting/studies.h"
#include "coordinator/fitting/study_sharing.h"
#include "coordinator/store/fit_rows.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/store_writes.h"
#include "fitter/db_source.h"
#include "fitter/study_fit.h"
#include "glog/logging.h"

namespace xmod {
namespace {

using fitter::IsDenseReference;
using fitter::IsObservation;

// A defect no later run can repair: a succeeded run of the fit with no val/loss point, or
// with a value that is not finite and positive (a NaN, which the store keeps as text
// (store_writes.h), reads as NaN through fitter::LoadSweepRuns).
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

// At start, only what the stored fits do not cover yet; later, every change.
bool WantsFit(const SucceededRuns& r, bool first, bool changed) {
  const bool stale = r.last_fit_ms < 0 || r.last_finished_ms > r.last_fit_ms;
  return first ? stale : changed;
}

}  // namespace

// What a fit attempt reads: the runs of the sweep, or of each member sweep of the study.
struct FitTrigger::Job {
  std::string name;     // "sweep 3", "study 'b4'": for logs
  bool skip = false;    // a sweep without fit.enabled
  bool active = false;  // a run of the sweep (of a member) is still queued or running
  uint64_t seed = 0;
  int bootstrap_samples = 0;
  std::vector<fitter::StudyMemberRuns> members;  // a sweep's: one, without a role
};

// What a poll reads.
struct FitTrigger::PollRows {
  std::vector<SucceededRuns> sweeps;
  std::vector<SucceededRuns> studies;
  std::map<int64_t, bool> new_sweeps;  // sweep -> fit.enabled, for sweeps not seen before
};

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

void FitTrigger::RequestFit(int64_t sweep_id) { Request({sweep_id, 0}); }

void FitTrigger::RequestStudyFit(int64_t study_id) { Request({0, study_id}); }

void FitTrigger::Request(const Target& target) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  if (running_ == target) {
    running_pending_ = true;
  } else if (queued_.insert(target).second) {
    queue_.push_back(target);
  }
}

void FitTrigger::CancelFit(int64_t sweep_id) {
  const Target target{sweep_id, 0};
  absl::MutexLock lock(&mu_);
  if (queued_.erase(target) > 0) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), target));
  }
  if (running_ == target) {
    running_pending_ = false;
    cancel_running_ = true;
  }
}

void FitTrigger::WaitIdle() {
  absl::MutexLock lock(&mu_);
  const auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue_.empty() && running_ == Target();
  };
  mu_.Await(absl::Condition(&idle));
}

void FitTrigger::Loop() {
  while (true) {
    Target target;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      target = queue_.front();
      queue_.pop_front();
      queued_.erase(target);
      running_ = target;
      running_pending_ = false;
      cancel_running_ = false;
    }
    if (options_.TEST_before_fit) options_.TEST_before_fit(target.sweep_id);
    FitOnce(target);
    absl::MutexLock lock(&mu_);
    // A request that came while the fit ran gets exactly one more fit, behind the others.
    if (running_pending_ && !stopping_ && queued_.insert(target).second) {
      queue_.push_back(target);
    }
    running_pending_ = false;
    running_ = Target();
  }
}

absl::Status FitTrigger::Poll() {
  absl::MutexLock poll_lock(&poll_mu_);
  PollRows rows;
  if (absl::Status read = ReadPollRows(&rows); !read.ok()) return read;
  const bool first = !polled_;
  polled_ = true;
  RequestSweepFits(rows, first);
  RequestStudyFits(rows, first);
  return absl::OkStatus();
}

absl::Status FitTrigger::ReadPollRows(PollRows* rows) {
  return store_->Read([&](Db& db) {
    absl::StatusOr<std::vector<SucceededRuns>> sweeps = SucceededRunsBySweep(db);
    if (!sweeps.ok()) return sweeps.status();
    rows->sweeps = *std::move(sweeps);
    for (const SucceededRuns& r : rows->sweeps) {
      if (seen_.count(r.id)) continue;
      absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, r.id);
      if (!sweep.ok()) return sweep.status();
      rows->new_sweeps[r.id] = sweep->spec().fit().enabled();
    }
    absl::StatusOr<std::vector<SucceededRuns>> studies = SucceededRunsByStudy(db);
    if (!studies.ok()) return studies.status();
    rows->studies = *std::move(studies);
    return absl::OkStatus();
  });
}

void FitTrigger::RequestSweepFits(const PollRows& rows, bool first) {
  for (const SucceededRuns& r : rows.sweeps) {
    auto [it, inserted] = seen_.try_emplace(r.id);
    SweepSeen& seen = it->second;
    if (inserted) {
      auto read = rows.new_sweeps.find(r.id);  // every sweep not seen before was read
      seen.fit_enabled = read != rows.new_sweeps.end() && read->second;
    }
    const bool changed = seen.succeeded != r.succeeded;
    seen.succeeded = r.succeeded;
    if (!seen.fit_enabled) continue;
    if (WantsFit(r, first, changed)) RequestFit(r.id);
  }
}

void FitTrigger::RequestStudyFits(const PollRows& rows, bool first) {
  for (const SucceededRuns& r : rows.studies) {
    int64_t& succeeded = study_seen_[r.id];
    const bool changed = succeeded != r.succeeded;
    succeeded = r.succeeded;
    if (WantsFit(r, first, changed)) RequestStudyFit(r.id);
  }
}

absl::Status FitTrigger::ReadSweepJob(int64_t sweep_id, Job* job) {
  job->name = absl::StrCat("sweep ", sweep_id);
  xmod::v1::Sweep sweep;
  std::vector<fitter::RunCurve> runs;
  absl::Status read = store_->Read([&](Db& db) {
    absl::StatusOr<xmod::v1::Sweep> s = LoadSweep(db, sweep_id);
    if (!s.ok()) return s.status();
    sweep = *std::move(s);
    if (!sweep.spec().fit().enabled()) return absl::OkStatus();
    absl::StatusOr<std::vector<fitter::RunCurve>> r = fitter::LoadSweepRuns(db, sweep_id);
    if (!r.ok()) return r.status();
    runs = *std::move(r);
    // A run a study trains in another sweep in this one's place (study_sharing.h) is its run.
    absl::StatusOr<std::vector<fitter::RunCurve>> elsewhere =
        LoadRunsTrainedElsewhere(db, sweep_id);
    if (!elsewhere.ok()) return elsewhere.status();
    runs.insert(runs.end(), elsewhere->begin(), elsewhere->end());
    return absl::OkStatus();
  });
  if (!read.ok()) return read;
  const xmod::v1::FitPlan& plan = sweep.spec().fit();
  job->skip = !plan.enabled();
  if (job->skip) return absl::OkStatus();
  job->active = sweep.state() == xmod::v1::SWEEP_ACTIVE;
  job->seed = plan.seed();
  job->bootstrap_samples = plan.bootstrap_samples();
  job->members.push_back({job->name, std::move(runs), std::nullopt});
  if (job->active) {
    if (int dropped = fitter::DropSparseWithoutDense(&job->members.back().runs); dropped > 0) {
      VLOG(1) << job->name << ": " << dropped << " sparse runs wait for their dense reference";
    }
  }
  return absl::OkStatus();
}

absl::Status FitTrigger::ReadStudyJob(int64_t study_id, Job* job) {
  xmod::v1::Study study;
  std::vector<bool> active;                         // per member
  std::vector<std::vector<fitter::RunCurve>> runs;  // per member
  std::vector<int64_t> sweep_ids;                   // per member
  absl::Status read = store_->Read([&](Db& db) {
    absl::StatusOr<xmod::v1::Study> s = LoadStudyById(db, study_id);
    if (!s.ok()) return s.status();
    study = *std::move(s);
    for (const xmod::v1::StudyMember& m : study.spec().members()) {
      absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, m.sweep_id());
      if (!sweep.ok()) return sweep.status();
      active.push_back(sweep->state() == xmod::v1::SWEEP_ACTIVE);
      absl::StatusOr<std::vector<fitter::RunCurve>> r = fitter::LoadSweepRuns(db, m.sweep_id());
      if (!r.ok()) return r.status();
      runs.push_back(*std::move(r));
      sweep_ids.push_back(m.sweep_id());
    }
    // A member's run another member trains in its place (study_sharing.h) is that run.
    absl::StatusOr<std::vector<SharedRunRow>> shared = LoadSharedRuns(db, sweep_ids);
    if (!shared.ok()) return shared.status();
    AddTrainedRuns(*shared, sweep_ids, &runs);
    return absl::OkStatus();
  });
  if (!read.ok()) return read;
  job->name = absl::StrCat("study '", study.spec().name(), "'");
  job->seed = study.spec().seed();
  job->bootstrap_samples = study.spec().bootstrap_samples();
  for (int i = 0; i < study.spec().members_size(); ++i) {
    const xmod::v1::StudyMember& m = study.spec().members(i);
    job->members.push_back({absl::StrCat("sweep ", m.sweep_id(), " (", m.role(), ")"),
                            std::move(runs[i]), MemberRole(m.role())});
    if (active[i]) {
      job->active = true;
      if (int dropped = fitter::DropSparseWithoutDense(&job->members.back().runs); dropped > 0) {
        VLOG(1) << job->name << ", " << job->members.back().name << ": " << dropped
                << " sparse runs wait for their dense reference";
      }
    }
  }
  return absl::OkStatus();
}

void FitTrigger::FitOnce(const Target& target) {
  {
    absl::MutexLock lock(&mu_);
    ++attempts_;
  }
  Job job;
  absl::Status read = target.study_id != 0 ? ReadStudyJob(target.study_id, &job)
                                           : ReadSweepJob(target.sweep_id, &job);
  if (absl::IsNotFound(read) || job.skip) return;
  if (!read.ok()) {
    LOG(WARNING) << "fit of " << job.name << ": " << read;
    CountFitError();
    return;
  }

  const fitter::SweepFitOptions options = FitOptionsFor(job);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<fitter::FitReport> report =
      target.study_id != 0 ? fitter::FitStudy(job.members, options)
                           : fitter::FitSweep(job.members.front().runs, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (absl::IsCancelled(report.status())) {
    LOG(INFO) << job.name << ": fit cancelled after " << seconds << " s";
    return;
  }
  std::optional<xmod::v1::Fit> fit = FitToStore(job, report);
  if (!fit.has_value()) return;
  RecordFit(target, job, seconds, *std::move(fit));
}

void FitTrigger::CountFitError() {
  if (fits_error_ != nullptr) fits_error_->Increment();
}

fitter::SweepFitOptions FitTrigger::FitOptionsFor(const Job& job) {
  fitter::SweepFitOptions options = options_.fit;
  options.fit.search.seed = job.seed;
  options.fit.search.cancel = &cancel_running_;
  options.bootstrap_samples = std::clamp(job.bootstrap_samples, 0, options_.max_bootstrap_samples);
  if (options.bootstrap_samples != job.bootstrap_samples) {
    LOG(WARNING) << job.name << ": fit.bootstrap_samples " << job.bootstrap_samples
                 << " clamped to " << options.bootstrap_samples;
  }
  return options;
}

std::optional<xmod::v1::Fit> FitTrigger::FitToStore(
    const Job& job, const absl::StatusOr<fitter::FitReport>& report) {
  xmod::v1::Fit fit;
  if (report.ok()) {
    fit = fitter::ToFitProto(*report);
  } else if (job.active && std::none_of(job.members.begin(), job.members.end(),
                                        [](const fitter::StudyMemberRuns& m) {
                                          return HasUnrepairableInput(m.runs);
                                        })) {
    LOG(INFO) << job.name << ": not enough data to fit yet (" << report.status().message() << ")";
    return std::nullopt;
  } else {
    fit.set_error(std::string(report.status().message()));
  }
  return fit;
}

void FitTrigger::RecordFit(const Target& target, const Job& job, double seconds,
                           xmod::v1::Fit fit) {
  if (fit_seconds_ != nullptr) fit_seconds_->Observe(seconds);
  fit.set_sweep_id(target.sweep_id);
  fit.set_study_id(target.study_id);
  fit.set_created_unix_ms(clock_->NowMillis());
  if (absl::Status s = StoreFit(fit); !s.ok()) {
    LOG(WARNING) << "fit of " << job.name << ": storing it: " << s;
    CountFitError();
    return;
  }
  if (fit.error().empty()) {
    if (fits_ok_ != nullptr) fits_ok_->Increment();
    LOG(INFO) << job.name << ": fitted " << fit.n_obs() << " observations, R²_Δ " << fit.r2()
              << ", RMSE " << fit.rmse() << " (" << seconds << " s)";
  } else {
    CountFitError();
    LOG(WARNING) << job.name << ": fit failed: " << fit.error();
  }
}

absl::Status FitTrigger::StoreFit(const xmod::v1::Fit& fit) {
  return store_->WriteAndWait([&fit](Db& db) { return InsertFit(db, fit).status(); });
}

}  // namespace xmod
