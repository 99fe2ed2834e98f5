// Runs the member sweeps of a study share. See study_sharing.h.
#include "coordinator/fitting/study_sharing.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/proto_bytes.h"
#include "coordinator/store/store_reads.h"
#include "fitter/db_source.h"

namespace xmod {
namespace {

bool Trainable(const xmod::v1::Run& run) {
  return run.state() != xmod::v1::FAILED && run.state() != xmod::v1::CANCELLED;
}

// Whether `later` is further along than `earlier`, its twin: succeeded while the other has
// not, else more training FLOPs done. On a tie the earlier member's run is kept.
bool FurtherAlong(const xmod::v1::Run& later, const xmod::v1::Run& earlier) {
  const auto standing = [](const xmod::v1::Run& run) {
    return std::make_pair(run.state() == xmod::v1::SUCCEEDED, run.progress().flops());
  };
  return standing(later) > standing(earlier);
}

// An observation of the law in range: an X-MoD run with K >= 2 its FitPlan does not hold out.
bool InRangeObservation(const xmod::v1::Run& run) {
  return run.spec().model().arch() == xmod::v1::XMOD && run.spec().model().k() >= 2 &&
         !run.held_out();
}

}  // namespace

std::string RunIdentity(const xmod::v1::RunSpec& spec) {
  xmod::v1::RunSpec configuration;
  *configuration.mutable_model() = spec.model();
  *configuration.mutable_training() = spec.training();
  *configuration.mutable_data() = spec.data();
  return DeterministicBytes(configuration);
}

namespace {

absl::StatusOr<std::set<int64_t>> LinkedRunIds(Db& db, const std::vector<int64_t>& sweep_ids) {
  absl::StatusOr<std::vector<SharedRunRow>> linked = LoadSharedRuns(db, sweep_ids);
  if (!linked.ok()) return linked.status();
  std::set<int64_t> already;
  for (const SharedRunRow& row : *linked) already.insert(row.run_id);
  return already;
}

// The plan so far, as the members' runs are visited in member order.
struct SharingPlan {
  int64_t study_id = 0;
  std::set<int64_t> already;  // runs linked before
  StudySharing out;
  std::map<std::string, xmod::v1::Run> earlier;  // configuration -> the run kept so far
  std::set<std::string> observed;                // configurations of in-range X-MoD runs
};

using KeptRuns = std::vector<std::pair<std::string, xmod::v1::Run>>;

void CountObservation(const xmod::v1::Run& run, SharingPlan* plan) {
  if (Trainable(run) && InRangeObservation(run)) {
    ++plan->out.listed_observations;
    xmod::v1::RunSpec unseeded = run.spec();  // the fit averages replicates of other seeds
    unseeded.mutable_training()->clear_seed();
    plan->observed.insert(RunIdentity(unseeded));
  }
}

// Links `run` of member `sweep_id` with its twin of an earlier member, if any; adds it to
// `kept` when later members are to be matched against it.
void MatchRun(const xmod::v1::Run& run, int64_t sweep_id, SharingPlan* plan, KeptRuns* kept) {
  if (!Trainable(run) || plan->already.count(run.id()) > 0) return;
  std::string identity = RunIdentity(run.spec());
  auto twin = plan->earlier.find(identity);
  if (twin == plan->earlier.end()) {
    kept->emplace_back(std::move(identity), run);
  } else if (run.state() == xmod::v1::SUCCEEDED && twin->second.state() == xmod::v1::SUCCEEDED) {
    // Both trained already: nothing is saved; the fit counts the configuration once.
  } else if (FurtherAlong(run, twin->second)) {
    // The earlier member's twin gives way: it is cancelled and this run trains for both.
    plan->out.links.push_back(
        {twin->second.id(), twin->second.sweep_id(), run.id(), plan->study_id});
    kept->emplace_back(std::move(identity), run);
  } else {
    plan->out.links.push_back({run.id(), sweep_id, twin->second.id(), plan->study_id});
  }
}

absl::Status PlanMember(Db& db, int64_t sweep_id, SharingPlan* plan) {
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = LoadRuns(db, RunFilter{.sweep_id = sweep_id});
  if (!runs.ok()) return runs.status();
  // This member's runs that earlier members' runs of the same configuration give way to, or
  // that none lists: the ones later members are matched against. Added after the member.
  KeptRuns kept;
  for (const xmod::v1::Run& run : *runs) {
    CountObservation(run, plan);
    MatchRun(run, sweep_id, plan, &kept);
  }
  for (auto& [identity, run] : kept)
    plan->earlier.insert_or_assign(std::move(identity), std::move(run));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StudySharing> PlanSharedRuns(Db& db, const xmod::v1::StudySpec& spec,
                                            int64_t study_id) {
  std::vector<int64_t> sweep_ids;
  for (const xmod::v1::StudyMember& m : spec.members()) sweep_ids.push_back(m.sweep_id());
  absl::StatusOr<std::set<int64_t>> already = LinkedRunIds(db, sweep_ids);
  if (!already.ok()) return already.status();
  SharingPlan plan;
  plan.study_id = study_id;
  plan.already = *std::move(already);
  for (int64_t sweep_id : sweep_ids) {
    if (absl::Status s = PlanMember(db, sweep_id, &plan); !s.ok()) return s;
  }
  plan.out.in_range_observations = static_cast<int>(plan.observed.size());
  return std::move(plan.out);
}

absl::Status StoreSharedRuns(Db& db, const std::vector<SharedRunRow>& links, int64_t now_ms) {
  for (const SharedRunRow& link : links) {
    if (absl::Status s = InsertSharedRun(db, link, now_ms); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void AddTrainedRuns(const std::vector<SharedRunRow>& links, const std::vector<int64_t>& sweep_ids,
                    std::vector<std::vector<fitter::RunCurve>>* runs) {
  std::map<int64_t, fitter::RunCurve> by_id;
  for (const std::vector<fitter::RunCurve>& member : *runs) {
    for (const fitter::RunCurve& run : member) by_id.emplace(run.run_id, run);
  }
  for (const SharedRunRow& link : links) {
    auto trained = by_id.find(link.trained_run_id);
    if (trained == by_id.end()) continue;  // not (yet) succeeded, or outside the study
    for (size_t i = 0; i < sweep_ids.size(); ++i) {
      if (sweep_ids[i] == link.sweep_id) (*runs)[i].push_back(trained->second);
    }
  }
}

absl::StatusOr<std::vector<fitter::RunCurve>> LoadRunsTrainedElsewhere(Db& db, int64_t sweep_id) {
  absl::StatusOr<std::vector<SharedRunRow>> links = LoadSharedRuns(db, {sweep_id});
  if (!links.ok()) return links.status();
  std::set<int64_t> trained_ids;
  std::set<int64_t> trained_sweeps;
  for (const SharedRunRow& link : *links) {
    trained_ids.insert(link.trained_run_id);
    trained_sweeps.insert(link.trained_sweep_id);
  }
  std::vector<fitter::RunCurve> out;
  for (int64_t other : trained_sweeps) {
    absl::StatusOr<std::vector<fitter::RunCurve>> runs = fitter::LoadSweepRuns(db, other);
    if (!runs.ok()) return runs.status();
    for (fitter::RunCurve& run : *runs) {
      if (trained_ids.count(run.run_id) > 0) out.push_back(std::move(run));
    }
  }
  return out;
}

}  // namespace xmod
