// See pilot_selection.h.
#include "fitter/pilot_selection.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace xmod::fitter {
namespace {

using xmod::v1::PilotConfiguration;
using xmod::v1::PilotSelection;
using xmod::v1::SelectPilotResponse;

struct MoeLayout {
  int active = 0, total = 0, shared = 0;
};

absl::StatusOr<MoeLayout> ParseMoe(const std::string& moe) {
  const absl::Status bad = absl::InvalidArgumentError(
      absl::StrCat("moe: '", moe, "' is not active:total+shared (e.g. 6:64+2)"));
  std::vector<std::string> colon = absl::StrSplit(moe, ':');
  if (colon.size() != 2) return bad;
  std::vector<std::string> plus = absl::StrSplit(colon[1], '+');
  MoeLayout out;
  if (plus.size() > 2 || !absl::SimpleAtoi(colon[0], &out.active) ||
      !absl::SimpleAtoi(plus[0], &out.total) ||
      (plus.size() == 2 && !absl::SimpleAtoi(plus[1], &out.shared))) {
    return bad;
  }
  if (out.active < 1 || out.total < 1 || out.shared < 0) return bad;
  return out;
}

// Routed experts over active ones (shared included) when whole, else 0.
int NominalK(const MoeLayout& m) {
  const int active = m.active + m.shared;
  return m.total % active == 0 ? m.total / active : 0;
}

// "A4K8", "A0.5K16".
std::string XmodLabel(double a, int k) { return absl::StrFormat("A%gK%d", a, k); }

// B.3's name: active experts (shared included) : routed total, "s2" for two shared ones
// (Fig. 4 prints 6:64+2 as 8o64s2; Table 1 calls it MoE 8:64).
std::string MoeLabel(const MoeLayout& m) {
  std::string label = absl::StrCat("MoE ", m.active + m.shared, ":", m.total);
  if (m.shared > 0) absl::StrAppend(&label, "s", m.shared);
  return label;
}

bool Pending(xmod::v1::RunState state) {
  return state != xmod::v1::SUCCEEDED && state != xmod::v1::FAILED && state != xmod::v1::CANCELLED;
}

// The configuration of `run` (its first run); the counts and the loss come later.
absl::StatusOr<PilotConfiguration> NewConfiguration(const PilotRun& run) {
  PilotConfiguration c;
  c.set_arch(run.arch);
  c.set_backbone(run.backbone);
  c.set_seq_len(run.seq_len);
  c.set_flop_budget(run.flop_budget);
  c.set_total_params(run.total_params);
  if (run.arch == xmod::v1::MOE) {
    absl::StatusOr<MoeLayout> layout = ParseMoe(run.moe);
    if (!layout.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("run ", run.run_id, ": ", layout.status().message()));
    }
    c.set_moe(run.moe);
    c.set_label(MoeLabel(*layout));
    c.set_k(NominalK(*layout));
  } else {
    c.set_k(run.k);
    c.set_a(run.a.value_or(1));
    c.set_label(XmodLabel(c.a(), run.k));
  }
  return c;
}

// Groups `runs` into configurations (X-MoD and MoE only) with their status and mean loss.
absl::StatusOr<std::vector<PilotConfiguration>> Configurations(const std::vector<PilotRun>& runs,
                                                               int* other_runs) {
  std::map<std::string, size_t> index;  // replicate key -> configuration
  std::vector<PilotConfiguration> out;
  std::vector<double> loss_sum;
  std::vector<bool> pending;
  for (const PilotRun& run : runs) {
    if (run.arch != xmod::v1::XMOD && run.arch != xmod::v1::MOE) {
      ++*other_runs;
      continue;
    }
    auto [it, inserted] = index.emplace(run.replicate_key, out.size());
    if (inserted) {
      absl::StatusOr<PilotConfiguration> c = NewConfiguration(run);
      if (!c.ok()) return c.status();
      out.push_back(*std::move(c));
      loss_sum.push_back(0);
      pending.push_back(false);
    }
    const size_t i = it->second;
    PilotConfiguration& c = out[i];
    c.set_runs(c.runs() + 1);
    c.add_run_ids(run.run_id);
    if (Pending(run.state)) pending[i] = true;
    if (run.state == xmod::v1::SUCCEEDED && run.final_val_loss &&
        std::isfinite(*run.final_val_loss)) {
      c.set_runs_succeeded(c.runs_succeeded() + 1);
      loss_sum[i] += *run.final_val_loss;
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    PilotConfiguration& c = out[i];
    if (pending[i]) {
      c.set_status(xmod::v1::PILOT_PENDING);
    } else if (c.runs_succeeded() > 0) {
      c.set_status(xmod::v1::PILOT_MEASURED);
      c.set_val_loss(loss_sum[i] / c.runs_succeeded());
    } else {
      c.set_status(xmod::v1::PILOT_NO_RESULT);
    }
  }
  return out;
}

// The comparison group: same backbone, L, budget, nominal K.
auto GroupOf(const PilotConfiguration& c) {
  return std::make_tuple(c.backbone(), c.seq_len(), c.flop_budget(), c.k());
}

// Fig. 4's order: group, then total parameters, then label.
bool TableOrder(const PilotConfiguration& x, const PilotConfiguration& y) {
  return std::make_tuple(GroupOf(x), x.total_params(), x.label()) <
         std::make_tuple(GroupOf(y), y.total_params(), y.label());
}

// Measured first, by loss, then fewer parameters, then smaller A; the others by parameters.
bool RankOrder(const PilotConfiguration& x, const PilotConfiguration& y) {
  const bool xm = x.status() == xmod::v1::PILOT_MEASURED;
  const bool ym = y.status() == xmod::v1::PILOT_MEASURED;
  if (xm != ym) return xm;
  const double xl = xm ? x.val_loss() : 0, yl = ym ? y.val_loss() : 0;
  return std::make_tuple(xl, x.total_params(), x.a(), x.label()) <
         std::make_tuple(yl, y.total_params(), y.a(), y.label());
}

std::string WhyNoPick(const PilotConfiguration& moe, const PilotSelection& s) {
  if (moe.k() == 0) {
    return absl::StrCat("the nominal K of ", moe.moe(),
                        " (routed / active incl. shared) is "
                        "not whole, so no X-MoD K matches it");
  }
  const std::string group = absl::StrFormat("K = %d, backbone %s, L = %d, C = %g", moe.k(),
                                            moe.backbone(), moe.seq_len(), moe.flop_budget());
  if (s.within_budget().empty() && s.over_budget().empty()) {
    return absl::StrCat("no X-MoD configuration at ", group);
  }
  if (s.within_budget().empty()) {
    return absl::StrFormat(
        "every X-MoD configuration at %s has more than the MoE's %.6g "
        "total parameters",
        group, moe.total_params());
  }
  return absl::StrCat("no X-MoD configuration within the budget has finished yet (", group, ")");
}

// The selection for configurations[moe_index] (a MoE).
PilotSelection SelectFor(const std::vector<PilotConfiguration>& configs, int moe_index) {
  const PilotConfiguration& moe = configs[moe_index];
  PilotSelection s;
  s.set_moe_index(moe_index);
  s.set_pick_index(-1);
  std::vector<int> within, over;
  bool baseline = moe.status() == xmod::v1::PILOT_MEASURED;
  for (int i = 0; i < static_cast<int>(configs.size()); ++i) {
    const PilotConfiguration& c = configs[i];
    if (GroupOf(c) != GroupOf(moe) || moe.k() == 0) continue;
    if (c.arch() == xmod::v1::MOE) {
      if (i != moe_index && c.status() == xmod::v1::PILOT_MEASURED && RankOrder(c, moe)) {
        baseline = false;
      }
      continue;
    }
    (c.total_params() <= moe.total_params() ? within : over).push_back(i);
  }
  std::sort(within.begin(), within.end(),
            [&](int x, int y) { return RankOrder(configs[x], configs[y]); });
  std::sort(over.begin(), over.end(), [&](int x, int y) {
    return std::make_pair(configs[x].total_params(), configs[x].label()) <
           std::make_pair(configs[y].total_params(), configs[y].label());
  });
  s.set_baseline(baseline);
  for (int i : within) {
    s.add_within_budget(i);
    if (configs[i].status() == xmod::v1::PILOT_PENDING) s.set_provisional(true);
  }
  for (int i : over) s.add_over_budget(i);
  if (!within.empty() && configs[within[0]].status() == xmod::v1::PILOT_MEASURED) {
    s.set_pick_index(within[0]);
  } else {
    s.set_reason(WhyNoPick(moe, s));
  }
  return s;
}

}  // namespace

std::string ReplicateKey(xmod::v1::RunSpec spec) {
  spec.mutable_training()->clear_seed();
  spec.clear_run_id();
  spec.clear_attempt();
  spec.clear_checkpoint_dir();
  std::string key;
  google::protobuf::io::StringOutputStream stream(&key);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  spec.SerializeToCodedStream(&coded);
  coded.Trim();
  return key;
}

absl::StatusOr<SelectPilotResponse> SelectPilot(int64_t sweep_id,
                                                const std::vector<PilotRun>& runs) {
  int other_runs = 0;
  absl::StatusOr<std::vector<PilotConfiguration>> configs = Configurations(runs, &other_runs);
  if (!configs.ok()) return configs.status();
  int moes = 0, xmods = 0, measured = 0, pending = 0;
  for (const PilotConfiguration& c : *configs) {
    (c.arch() == xmod::v1::MOE ? moes : xmods) += 1;
    measured += c.status() == xmod::v1::PILOT_MEASURED;
    pending += c.status() == xmod::v1::PILOT_PENDING;
  }
  if (moes == 0 || xmods == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "sweep %d is not a pilot: it has %d MoE and %d X-MoD configurations; the B.3 pilot "
        "selection compares X-MoD configurations with MoE baselines and needs both",
        sweep_id, moes, xmods));
  }
  if (measured == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "pilot sweep %d has no finished run with a final validation loss yet (%d of %d "
        "configurations queued or running)",
        sweep_id, pending, configs->size()));
  }
  std::sort(configs->begin(), configs->end(), TableOrder);
  SelectPilotResponse out;
  out.set_sweep_id(sweep_id);
  out.set_other_runs(other_runs);
  for (int i = 0; i < static_cast<int>(configs->size()); ++i) {
    if ((*configs)[i].arch() == xmod::v1::MOE) *out.add_selections() = SelectFor(*configs, i);
  }
  for (PilotConfiguration& c : *configs) *out.add_configurations() = std::move(c);
  return out;
}

}  // namespace xmod::fitter
