// See sweep_forecast.h.
#include "coordinator/api/sweep_forecast.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto_bytes.h"
#include "model/accounting/accounting.h"

namespace xmod {
namespace {

// Matches, by key, of one device kind: per-rank speeds.
using Speeds = std::map<std::string, std::vector<double>>;

const std::string& PrecisionOf(const xmod::v1::RunSpec& spec) {
  static const std::string kAuto = "auto";
  return spec.training().precision().empty() ? kAuto : spec.training().precision();
}
std::string Describe(const xmod::v1::RunSpec& spec) {
  return absl::StrCat(spec.model().backbone().name(), " ",
                      xmod::v1::Architecture_Name(spec.model().arch()), ", L ",
                      spec.training().seq_len(), ", ", PrecisionOf(spec));
}
std::string ExactKey(const xmod::v1::RunSpec& spec) {
  return absl::StrCat(DeterministicBytes(spec.model()), "|", spec.training().seq_len(), "|",
                      PrecisionOf(spec));
}
std::string CoarseKey(const xmod::v1::RunSpec& spec) { return Describe(spec); }

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

struct Measured {
  std::map<std::string, Speeds> exact;   // by kind ("cuda", "cpu")
  std::map<std::string, Speeds> coarse;  // by kind
};

Measured Index(const std::vector<ThroughputSample>& samples) {
  Measured m;
  for (const ThroughputSample& s : samples) {
    const double per_rank = s.tokens_per_second / std::max(1, s.spec.training().ranks());
    m.exact[s.slot_kind][ExactKey(s.spec)].push_back(per_rank);
    m.coarse[s.slot_kind][CoarseKey(s.spec)].push_back(per_rank);
  }
  return m;
}

// The matches for `spec` and where they came from: the same model first, CUDA before CPU.
bool Lookup(const Measured& m, const xmod::v1::RunSpec& spec, std::vector<double>* speeds,
            std::string* kind, bool* exact) {
  for (bool same_model : {true, false}) {
    const std::map<std::string, Speeds>& by_kind = same_model ? m.exact : m.coarse;
    const std::string key = same_model ? ExactKey(spec) : CoarseKey(spec);
    for (const char* k : {"cuda", "cpu"}) {
      auto of_kind = by_kind.find(k);
      if (of_kind == by_kind.end()) continue;
      auto found = of_kind->second.find(key);
      if (found == of_kind->second.end()) continue;
      *speeds = found->second;
      *kind = k;
      *exact = same_model;
      return true;
    }
  }
  return false;
}

xmod::v1::RunForecast ForecastRun(const xmod::v1::Run& run, const Measured& measured) {
  xmod::v1::RunForecast f;
  f.set_name(run.name());
  const xmod::v1::TrainingSpec& training = run.spec().training();
  const double flops_per_token = run.forward_flops_per_token() * TrainFlopsMultiplier(training);
  if (flops_per_token > 0) f.set_tokens(training.flop_budget() / flops_per_token);
  std::vector<double> speeds;
  std::string kind;
  bool exact = false;
  if (!Lookup(measured, run.spec(), &speeds, &kind, &exact)) {
    f.set_source(absl::StrCat("no finished run of ", Describe(run.spec()), " to go by"));
    return f;
  }
  const double per_rank = Median(speeds);
  const int ranks = std::max(1, training.ranks());
  f.set_device(kind);
  f.set_tokens_per_second(per_rank * ranks);
  f.set_slot_hours(f.tokens() / per_rank / 3600.0);
  f.set_source(absl::StrCat("median of ", speeds.size(), " finished run",
                            speeds.size() == 1 ? "" : "s", " of ", exact ? "the same model, " : "",
                            Describe(run.spec()), " on ", kind,
                            exact ? "" : " (other model options)"));
  return f;
}

}  // namespace

xmod::v1::SweepForecast ForecastSweep(const std::vector<xmod::v1::Run>& runs,
                                      const std::vector<ThroughputSample>& measured,
                                      const SlotCounts& slots) {
  const Measured index = Index(measured);
  xmod::v1::SweepForecast forecast;
  forecast.set_gpu_slots(slots.gpu);
  forecast.set_cpu_slots(slots.cpu);
  for (const xmod::v1::Run& run : runs) {
    xmod::v1::RunForecast f = ForecastRun(run, index);
    if (f.device() == "cuda") {
      forecast.set_gpu_hours(forecast.gpu_hours() + f.slot_hours());
    } else if (f.device() == "cpu") {
      forecast.set_cpu_slot_hours(forecast.cpu_slot_hours() + f.slot_hours());
    } else {
      forecast.set_unmeasured_runs(forecast.unmeasured_runs() + 1);
    }
    *forecast.add_runs() = std::move(f);
  }
  // No faster than the longest run on its own ranks.
  double wall = 0;
  for (const xmod::v1::RunForecast& f : forecast.runs()) {
    if (f.tokens_per_second() > 0) wall = std::max(wall, f.tokens() / f.tokens_per_second());
  }
  for (const auto& [hours, count] :
       {std::pair<double, int>{forecast.gpu_hours(), slots.gpu},
        std::pair<double, int>{forecast.cpu_slot_hours(), slots.cpu}}) {
    if (hours <= 0) continue;
    if (count <= 0) {
      wall = -1;  // unknown: no slots of a kind the sweep needs
      break;
    }
    wall = std::max(wall, hours * 3600.0 / count);
  }
  forecast.set_wall_seconds(std::max(0.0, wall));
  return forecast;
}

}  // namespace xmod
