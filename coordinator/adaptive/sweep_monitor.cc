// See sweep_monitor.h.
#include "coordinator/adaptive/sweep_monitor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "coordinator/store/design_rows.h"
#include "coordinator/store/live_delta_rows.h"
#include "coordinator/store/store_reads.h"
#include "fitter/db_source.h"
#include "fitter/live_delta.h"
#include "glog/logging.h"
#include "resultsdb/run_curves.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {
namespace {

constexpr double kDefaultAfterFraction = 0.5;
constexpr double kDefaultMargin = 0.05;
constexpr double kSameFlopsTolerance = 0.02;

struct SweepRun {
  fitter::RunCurve curve;
  xmod::v1::RunState state = xmod::v1::RUN_STATE_UNSPECIFIED;
};

// Everything one update reads, in one read transaction: the spec (its early-stopping rule)
// and every run of the sweep with its val/loss curve so far (resultsdb/run_curves.h).
struct SweepRead {
  xmod::v1::SweepSpec spec;
  std::vector<SweepRun> runs;
};

absl::Status ReadSweep(Db& db, int64_t sweep_id, SweepRead* out) {
  absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, sweep_id);
  if (!sweep.ok()) return sweep.status();
  out->spec = sweep->spec();
  absl::StatusOr<std::vector<StoredRunCurve>> runs = LoadRunCurves(db, sweep_id, {});
  if (!runs.ok()) return runs.status();
  for (const StoredRunCurve& stored : *runs) {
    out->runs.push_back({fitter::RunCurveFromStored(stored), stored.state});
  }
  return absl::OkStatus();
}

struct EarlyStop {
  int64_t run_id = 0;
  double flops = 0;
  double live_delta = 0;
  std::string reason;
};

// What the early-stopping rule compares a running run's live Δ with.
struct StopContext {
  double after = 0;   // fraction of the budget trained before a run may be stopped
  double margin = 0;  // how much worse than the best comparable run's live Δ
  std::map<int64_t, const SweepRun*> by_id;
  const std::vector<fitter::RunLiveDelta>& live;
};

// Runs of the same L, backbone and budget.
bool Comparable(const fitter::RunCurve& other, const fitter::RunCurve& run) {
  return other.seq_len == run.seq_len && other.backbone == run.backbone &&
         fitter::SameBudget(other.flop_budget, run.flop_budget);
}

struct BestPeer {
  double delta = std::numeric_limits<double>::infinity();  // infinite when none
  std::string name;
};

// The lowest live Δ at about `flops` among the other runs comparable with `run`.
BestPeer BestPeerAt(const StopContext& ctx, int64_t run_id, const fitter::RunCurve& run,
                    double flops) {
  BestPeer best;
  for (const fitter::RunLiveDelta& other : ctx.live) {
    const SweepRun& o = *ctx.by_id.at(other.run_id);
    if (other.run_id == run_id || !Comparable(o.curve, run)) continue;
    for (const fitter::LiveDeltaPoint& p : other.points) {
      if (std::abs(p.flops - flops) <= kSameFlopsTolerance * flops && p.delta < best.delta) {
        best.delta = p.delta;
        best.name = o.curve.name;
      }
    }
  }
  return best;
}

std::optional<EarlyStop> StopOf(const StopContext& ctx, const fitter::RunLiveDelta& mine) {
  const SweepRun& run = *ctx.by_id.at(mine.run_id);
  if (run.state != xmod::v1::RUNNING) return std::nullopt;
  const fitter::LiveDeltaPoint& last = mine.points.back();
  if (last.flops < ctx.after * run.curve.flop_budget) return std::nullopt;
  const BestPeer best = BestPeerAt(ctx, mine.run_id, run.curve, last.flops);
  if (!(std::isfinite(best.delta) && last.delta - best.delta > ctx.margin)) return std::nullopt;
  return EarlyStop{mine.run_id, last.flops, last.delta,
                   absl::StrFormat("stopped early at %.3g FLOPs (%.0f%% of the budget): live "
                                   "delta %.4f is %.4f worse than %s's %.4f (margin %.4f)",
                                   last.flops, 100 * last.flops / run.curve.flop_budget, last.delta,
                                   last.delta - best.delta, best.name, best.delta, ctx.margin)};
}

// The runs the early-stopping rule ends.
std::vector<EarlyStop> RunsToStop(const xmod::v1::EarlyStopping& rule,
                                  const std::vector<SweepRun>& runs,
                                  const std::vector<fitter::RunLiveDelta>& live) {
  std::vector<EarlyStop> out;
  if (!rule.enabled()) return out;
  const double after = rule.after_fraction() > 0 ? rule.after_fraction() : kDefaultAfterFraction;
  const double margin = rule.margin() > 0 ? rule.margin() : kDefaultMargin;
  StopContext ctx{after, margin, {}, live};
  for (const SweepRun& run : runs) ctx.by_id[run.curve.run_id] = &run;
  for (const fitter::RunLiveDelta& mine : live) {
    if (std::optional<EarlyStop> stop = StopOf(ctx, mine)) out.push_back(*std::move(stop));
  }
  return out;
}

// The live_delta rows of `live`: one per run and mark.
std::vector<LiveDeltaRow> RowsOf(const std::vector<fitter::RunLiveDelta>& live) {
  std::vector<LiveDeltaRow> rows;
  for (const fitter::RunLiveDelta& run : live) {
    for (const fitter::LiveDeltaPoint& p : run.points) {
      rows.push_back({run.run_id, p.flops, p.delta, p.sparse_loss, p.dense_loss});
    }
  }
  return rows;
}

}  // namespace

SweepMonitor::SweepMonitor(Store* store, ChangeFeed* feed, CoordinatorMetrics* metrics,
                           StopEarlyFn stop_early)
    : store_(store), feed_(feed), metrics_(metrics), stop_early_(std::move(stop_early)) {}

absl::Status SweepMonitor::Poll() {
  std::vector<int64_t> was_active;
  for (const auto& [sweep_id, unused] : seen_) was_active.push_back(sweep_id);
  std::map<int64_t, std::pair<int64_t, double>> now;
  std::set<int64_t> active;
  absl::Status status = store_->Read([&](Db& db) {
    absl::StatusOr<std::map<int64_t, ValLossCounts>> counts = LoadValLossCounts(db, was_active);
    if (!counts.ok()) return counts.status();
    for (const auto& [sweep_id, c] : *counts) {
      now[sweep_id] = {c.points, c.flops};
      if (c.active) active.insert(sweep_id);
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  for (const auto& [sweep_id, signature] : now) {
    auto seen = seen_.find(sweep_id);
    if (signature.first > 0 && (seen == seen_.end() || seen->second != signature)) {
      if (absl::Status s = Update(sweep_id); !s.ok()) {
        LOG(WARNING) << "live delta of sweep " << sweep_id << ": " << s;
        continue;  // retried at the next poll
      }
    }
    if (active.count(sweep_id) != 0) {
      seen_[sweep_id] = signature;
    } else {
      seen_.erase(sweep_id);  // ended: its last points are in
    }
  }
  return absl::OkStatus();
}

absl::Status SweepMonitor::Update(int64_t sweep_id) {
  SweepRead read;
  if (absl::Status s = store_->Read([&](Db& db) { return ReadSweep(db, sweep_id, &read); });
      !s.ok()) {
    return s;
  }
  std::vector<fitter::RunCurve> curves;
  for (const SweepRun& run : read.runs) curves.push_back(run.curve);
  const std::vector<fitter::RunLiveDelta> live = fitter::LiveDeltas(curves);
  const std::vector<LiveDeltaRow> rows = RowsOf(live);
  if (absl::Status s =
          store_->WriteAndWait([&](Db& db) { return ReplaceLiveDeltas(db, sweep_id, rows); });
      !s.ok()) {
    return s;
  }
  std::map<int64_t, const SweepRun*> by_id;
  for (const SweepRun& run : read.runs) by_id[run.curve.run_id] = &run;
  for (const fitter::RunLiveDelta& run : live) {
    const SweepRun& r = *by_id.at(run.run_id);
    if (metrics_ != nullptr && r.state == xmod::v1::RUNNING) {
      metrics_->SetRunLiveDelta(r.curve.name, run.points.back().delta);
    }
    feed_->Publish(sweep_id, run.run_id);
  }
  for (const EarlyStop& stop : RunsToStop(read.spec.early_stopping(), read.runs, live)) {
    LOG(INFO) << "run " << stop.run_id << " " << stop.reason;
    if (absl::Status s = stop_early_(stop.run_id, stop.flops, stop.live_delta, stop.reason);
        !s.ok()) {
      LOG(WARNING) << "early stop of run " << stop.run_id << ": " << s;
    }
  }
  return absl::OkStatus();
}

}  // namespace xmod
