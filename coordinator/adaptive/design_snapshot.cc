// See design_snapshot.h.
#include "coordinator/adaptive/design_snapshot.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/field_path.h"
#include "coordinator/adaptive/partial_runs.h"
#include "coordinator/adaptive/seeding.h"
#include "coordinator/fitting/studies.h"
#include "coordinator/store/design_store.h"
#include "coordinator/store/live_delta_rows.h"
#include "coordinator/store/store_reads.h"
#include "fitter/db_source.h"
#include "fitter/fit_observations.h"
#include "fitter/sweep_fit.h"

namespace xmod {
namespace {

absl::Status ReadStudy(Db& db, const std::string& name, int64_t sweep_id, SweepSnapshot* snap) {
  absl::StatusOr<xmod::v1::Study> study = LoadStudy(db, name);
  if (!study.ok()) return study.status();
  bool member = false;
  for (const xmod::v1::StudyMember& m : study->spec().members()) {
    absl::StatusOr<std::vector<fitter::RunCurve>> curves = fitter::LoadSweepRuns(db, m.sweep_id());
    if (!curves.ok()) return curves.status();
    fitter::DropSparseWithoutDense(&*curves);
    snap->study_members.push_back({absl::StrCat("sweep ", m.sweep_id(), " (", m.role(), ")"),
                                   *std::move(curves), MemberRole(m.role())});
    if (m.sweep_id() == sweep_id) {
      member = true;
      continue;
    }
    RunFilter filter;
    filter.sweep_id = m.sweep_id();
    absl::StatusOr<std::vector<xmod::v1::Run>> runs = LoadRuns(db, filter);
    if (!runs.ok()) return runs.status();
    snap->other_members_runs.insert(snap->other_members_runs.end(), runs->begin(), runs->end());
  }
  if (!member) {
    return InvalidField("sweep_id",
                        absl::StrCat("sweep ", sweep_id, " is not a member of study '", name, "'"));
  }
  return absl::OkStatus();
}

xmod::v1::DesignTarget TargetProto(const fitter::Target& t) {
  xmod::v1::DesignTarget out;
  out.set_flops(t.flops);
  out.set_seq_len(t.seq_len);
  out.set_backbone(t.backbone);
  return out;
}

std::vector<fitter::TargetAnswer> AnswersOf(const xmod::v1::DesignDecision& d) {
  std::vector<fitter::TargetAnswer> out;
  for (const xmod::v1::TargetRecommendation& r : d.recommendations()) {
    fitter::TargetAnswer a;
    a.target = {r.target().flops(), r.target().seq_len(), r.target().backbone()};
    a.k = r.k();
    a.a = r.a();
    a.delta = r.delta();
    a.delta_sd = r.delta_sd();
    a.p_best = r.p_best();
    a.expected_regret = r.expected_regret();
    a.regret_bound = r.regret_bound();
    a.confidence = r.confidence();
    out.push_back(a);
  }
  return out;
}

// The stored live Δ rows as the partial-curve model takes them: by run, ascending FLOPs.
std::map<int64_t, std::vector<fitter::LiveDeltaPoint>> LiveDeltasByRun(
    const std::vector<LiveDeltaRow>& rows) {
  std::map<int64_t, std::vector<fitter::LiveDeltaPoint>> by_run;
  for (const LiveDeltaRow& row : rows) {
    fitter::LiveDeltaPoint& p = by_run[row.run_id].emplace_back();
    p.flops = row.flops;
    p.delta = row.delta;
  }
  return by_run;
}

}  // namespace

absl::StatusOr<SweepSnapshot> ReadSnapshot(Store* store, int64_t sweep_id, const std::string& study,
                                           const std::string& source) {
  SweepSnapshot snap;
  absl::Status status = store->Read([&](Db& db) {
    absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, sweep_id);
    if (!sweep.ok()) return sweep.status();
    snap.sweep = *std::move(sweep);
    RunFilter filter;
    filter.sweep_id = sweep_id;
    absl::StatusOr<std::vector<xmod::v1::Run>> runs = LoadRuns(db, filter);
    if (!runs.ok()) return runs.status();
    snap.runs = *std::move(runs);
    absl::StatusOr<std::vector<fitter::RunCurve>> curves = fitter::LoadSweepRuns(db, sweep_id);
    if (!curves.ok()) return curves.status();
    snap.succeeded = *std::move(curves);
    absl::StatusOr<std::vector<LiveDeltaRow>> live = LoadSweepLiveDeltas(db, sweep_id);
    if (!live.ok()) return live.status();
    snap.live_deltas = LiveDeltasByRun(*live);
    absl::StatusOr<std::optional<xmod::v1::DesignDecision>> last =
        LoadLatestDecision(db, sweep_id, source);
    if (!last.ok()) return last.status();
    snap.last = *std::move(last);
    return study.empty() ? absl::OkStatus() : ReadStudy(db, study, sweep_id, &snap);
  });
  if (!status.ok()) return status;
  return snap;
}

bool InFlight(const xmod::v1::Run& run) {
  return run.state() == xmod::v1::QUEUED || run.state() == xmod::v1::RUNNING;
}

fitter::DesignState StateOf(const SweepSnapshot& snap) {
  fitter::DesignState state;
  absl::StatusOr<std::vector<fitter::Observation>> obs;
  if (snap.study_members.empty()) {
    std::vector<fitter::RunCurve> curves = snap.succeeded;
    fitter::DropSparseWithoutDense(&curves);
    obs = fitter::BuildObservations(curves, {});
  } else {
    obs = fitter::StudyObservations(snap.study_members, {});
  }
  if (obs.ok()) {
    for (fitter::Observation& o : *obs) {
      if (!o.held_out) state.completed.push_back(std::move(o));
    }
  }
  for (const std::vector<xmod::v1::Run>* runs : {&snap.runs, &snap.other_members_runs}) {
    for (const xmod::v1::Run& run : *runs) {
      std::optional<fitter::Candidate> c = CandidateOf(run);
      const double budget = run.spec().training().flop_budget();
      if (run.state() == xmod::v1::SUCCEEDED || InFlight(run)) {
        state.compute_spent += budget;
      } else {
        state.compute_spent += std::min(budget, run.progress().flops());
      }
      if (!c) continue;
      if (InFlight(run)) state.in_flight.push_back(*c);
      if (run.state() == xmod::v1::SUCCEEDED && c->IsDense()) state.dense_done.push_back(*c);
    }
  }
  state.partial = PartialRunsOf(snap.runs, snap.live_deltas);
  if (snap.last) {
    state.previous_answers = AnswersOf(*snap.last);
    state.previous_streak = snap.last->streak();
  }
  return state;
}

std::vector<int64_t> Signature(const std::vector<xmod::v1::Run>& runs) {
  std::vector<int64_t> counts(4, 0);
  for (const xmod::v1::Run& run : runs) {
    if (run.state() == xmod::v1::SUCCEEDED) ++counts[0];
    if (run.state() == xmod::v1::FAILED) ++counts[1];
    if (run.state() == xmod::v1::CANCELLED) ++counts[2];
    ++counts[3];
  }
  return counts;
}

xmod::v1::DesignDecision DecisionProto(const fitter::Decision& d) {
  xmod::v1::DesignDecision out;
  for (const fitter::Proposal& p : d.ranked) {
    xmod::v1::Proposal* q = out.add_proposals();
    q->set_backbone(p.run.backbone);
    q->set_seq_len(p.run.seq_len);
    q->set_k(p.run.k);
    q->set_a(p.run.a);
    q->set_flops(p.run.flops);
    q->set_needs_dense(p.needs_dense);
    q->set_cost_flops(p.cost_flops);
    q->set_value(p.value);
    q->set_score(p.score);
    q->set_reason(p.reason);
  }
  for (const fitter::TargetAnswer& a : d.answers) {
    xmod::v1::TargetRecommendation* r = out.add_recommendations();
    *r->mutable_target() = TargetProto(a.target);
    r->set_k(a.k);
    r->set_a(a.a);
    r->set_delta(a.delta);
    r->set_delta_sd(a.delta_sd);
    r->set_p_best(a.p_best);
    r->set_expected_regret(a.expected_regret);
    r->set_regret_bound(a.regret_bound);
    r->set_confidence(a.confidence);
  }
  out.set_stop(d.stop);
  out.set_stop_reason(d.stop_reason);
  out.set_held_back(d.held_back);
  out.set_streak(d.streak);
  if (d.fit_error.empty()) *out.mutable_fit() = fitter::LawParamsToProto(d.fit);
  out.set_fit_error(d.fit_error);
  out.set_noise_sd(d.noise_sd);
  out.set_ensemble_size(d.ensemble_size);
  return out;
}

}  // namespace xmod
