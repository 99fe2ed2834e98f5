// Regret bounds and the check of an answer against the design's own runs. See
// design_evidence.h.
#include "fitter/design_evidence.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace xmod::fitter {
namespace {

// A run measures a target directly when it is at the target's (backbone, L) and budget.
constexpr double kSameBudget = 0.02;

bool AtTarget(const Observation& o, const Target& t) {
  return o.backbone == t.backbone && o.seq_len == t.seq_len &&
         std::abs(o.flops - t.flops) <= kSameBudget * t.flops;
}

struct Moments {
  double mean = 0;
  double var = 0;
};

Moments MembersAt(const std::vector<LawParams>& members, const LawPoint& point) {
  Moments m;
  for (const LawParams& p : members) m.mean += PredictDelta(p, point);
  m.mean /= members.size();
  for (const LawParams& p : members) {
    const double d = PredictDelta(p, point) - m.mean;
    m.var += d * d;
  }
  m.var /= members.size();
  return m;
}

std::optional<std::string> MisfitAt(const Observation& o, const std::vector<LawParams>& members,
                                    double noise_sd, double z) {
  const Moments law = MembersAt(members, o.point());
  const double se = std::sqrt(noise_sd * noise_sd / std::max(1, o.replicates) + law.var);
  if (std::abs(o.delta - law.mean) <= z * se) return std::nullopt;
  return absl::StrFormat(
      "the law predicts Δ %+.4f at %s, where its %d run(s) measured %+.4f: %.1f standard "
      "errors (noise %.2g) apart",
      law.mean, o.Describe(), o.replicates, o.delta, std::abs(o.delta - law.mean) / se, noise_sd);
}

// The first run at the answer's target that the law misfits; `recommended` gets the (last) run
// there at the recommended option, if any.
std::optional<std::string> MisfitAtTarget(const std::vector<Observation>& completed,
                                          const TargetAnswer& answer,
                                          const std::vector<LawParams>& members, double noise_sd,
                                          double z, const Observation** recommended) {
  for (const Observation& o : completed) {
    if (!AtTarget(o, answer.target)) continue;
    if (std::optional<std::string> misfit = MisfitAt(o, members, noise_sd, z)) return misfit;
    if (o.k == answer.k && o.a == answer.a) *recommended = &o;
  }
  return std::nullopt;
}

// The first run at the answer's target that measured significantly better than the recommended
// option (measured when `recommended` is non-null, else predicted).
std::optional<std::string> BetterThanRecommended(const std::vector<Observation>& completed,
                                                 const TargetAnswer& answer,
                                                 const Observation* recommended, double noise_sd,
                                                 double z) {
  const double rec_delta = recommended != nullptr ? recommended->delta : answer.delta;
  const double rec_n = recommended != nullptr ? std::max(1, recommended->replicates) : 0;
  for (const Observation& o : completed) {
    if (!AtTarget(o, answer.target) || &o == recommended) continue;
    const double n = std::max(1, o.replicates);
    const double se = noise_sd * std::sqrt(1 / n + (rec_n > 0 ? 1 / rec_n : 0)) +
                      (rec_n > 0 ? 0 : answer.delta_sd);
    if (rec_delta - o.delta <= z * se) continue;
    return absl::StrFormat(
        "at %s the runs measured %s at Δ %+.4f, %.4f nats better than the recommended K=%d "
        "A=%g (%s %+.4f), more than %.1f standard errors (noise %.2g)",
        answer.target.Describe(), o.Describe(), o.delta, rec_delta - o.delta, answer.k, answer.a,
        rec_n > 0 ? "measured" : "predicted", rec_delta, z, noise_sd);
  }
  return std::nullopt;
}

}  // namespace

double RegretQuantile(const std::vector<std::vector<double>>& deltas, size_t chosen, double q) {
  if (deltas.empty()) return 0;
  std::vector<double> regrets;
  for (const std::vector<double>& row : deltas) {
    regrets.push_back(row[chosen] - *std::min_element(row.begin(), row.end()));
  }
  std::sort(regrets.begin(), regrets.end());
  const size_t n = regrets.size();
  size_t at = static_cast<size_t>(std::ceil(q * static_cast<double>(n)));
  at = std::clamp<size_t>(at, 1, n);
  return regrets[at - 1];
}

std::optional<std::string> DisagreementWithRuns(const std::vector<Observation>& completed,
                                                const std::vector<TargetAnswer>& answers,
                                                const std::vector<LawParams>& members,
                                                double noise_sd, double z) {
  if (members.empty()) return std::nullopt;
  for (const TargetAnswer& answer : answers) {
    const Observation* recommended = nullptr;
    if (std::optional<std::string> misfit =
            MisfitAtTarget(completed, answer, members, noise_sd, z, &recommended)) {
      return misfit;
    }
    if (answer.k == 1) continue;  // the dense answer: Δ = 0 exactly
    if (std::optional<std::string> better =
            BetterThanRecommended(completed, answer, recommended, noise_sd, z)) {
      return better;
    }
  }
  return std::nullopt;
}

}  // namespace xmod::fitter
