// Sweep run curves from the results database. See db_source.h.
#include "fitter/db_source.h"

#include <utility>

namespace xmod::fitter {
namespace {

std::vector<RunCurve> RunCurvesFromStored(const std::vector<StoredRunCurve>& stored) {
  std::vector<RunCurve> runs;
  runs.reserve(stored.size());
  for (const StoredRunCurve& s : stored) runs.push_back(RunCurveFromStored(s));
  return runs;
}

}  // namespace

RunCurve RunCurveFromStored(const StoredRunCurve& stored) {
  RunCurve run;
  run.run_id = stored.run_id;
  run.name = stored.name;
  run.arch = stored.arch;
  run.backbone = stored.backbone;
  run.seq_len = stored.seq_len;
  run.k = stored.k;
  run.a = stored.a.value_or(1);
  run.n0 = stored.n0.value_or(run.n0);
  run.held_out = stored.held_out;
  run.flop_budget = stored.flop_budget;
  run.seed = stored.seed;
  run.label = stored.label;
  run.points.reserve(stored.points.size());
  for (const StoredLossPoint& p : stored.points) run.points.push_back({p.flops, p.loss});
  return run;
}

absl::StatusOr<std::vector<RunCurve>> LoadSweepRuns(const std::string& db_path, int64_t sweep_id) {
  absl::StatusOr<std::vector<StoredRunCurve>> stored = LoadSucceededRunCurves(db_path, sweep_id);
  if (!stored.ok()) return stored.status();
  return RunCurvesFromStored(*stored);
}

absl::StatusOr<std::vector<RunCurve>> LoadSweepRuns(Db& db, int64_t sweep_id) {
  absl::StatusOr<std::vector<StoredRunCurve>> stored = LoadSucceededRunCurves(db, sweep_id);
  if (!stored.ok()) return stored.status();
  return RunCurvesFromStored(*stored);
}

}  // namespace xmod::fitter
