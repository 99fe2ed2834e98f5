// One observation per run identity, carrying every sweep's role. See shared_runs.h.
#include "fitter/shared_runs.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

namespace xmod::fitter {
namespace {

// An observation's configuration at its budget (the run identity without the seed).
using ConfigurationKey = std::tuple<std::string, int, int, double, int, double>;

ConfigurationKey ConfigurationOf(const Observation& o) {
  return {o.backbone, o.seq_len, o.k, o.a, o.n0, o.flop_budget};
}

}  // namespace

bool HasRunIdentity(const Observation& o) { return o.run_id != 0 && o.flop_budget > 0; }

std::vector<Observation> MergeSharedRuns(std::vector<Observation> observations) {
  struct Shared {
    std::set<SweepRole> roles;
    bool held_out = false;
  };
  std::map<ConfigurationKey, Shared> configurations;
  std::set<std::pair<ConfigurationKey, uint64_t>> seen;  // run identities kept
  std::vector<Observation> out;
  for (Observation& o : observations) {
    if (!HasRunIdentity(o)) {
      out.push_back(std::move(o));
      continue;
    }
    const ConfigurationKey configuration = ConfigurationOf(o);
    Shared& shared = configurations[configuration];
    shared.roles.insert(o.sweeps.begin(), o.sweeps.end());
    shared.held_out |= o.held_out;
    if (seen.insert({configuration, o.seed}).second) out.push_back(std::move(o));
  }
  for (Observation& o : out) {
    if (!HasRunIdentity(o)) continue;
    const Shared& shared = configurations.at(ConfigurationOf(o));
    o.sweeps.assign(shared.roles.begin(), shared.roles.end());
    o.held_out = shared.held_out;
  }
  return out;
}

}  // namespace xmod::fitter
