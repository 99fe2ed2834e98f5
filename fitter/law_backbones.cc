// Backbone facts for the law, from the accounting library. See law_backbones.h.
#include "fitter/law_backbones.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "model/accounting/accounting.h"

namespace xmod::fitter {
namespace {

xmod::v1::ModelSpec XmodSpec(const std::string& backbone, int k, double a, int n0) {
  xmod::v1::ModelSpec spec;
  spec.mutable_backbone()->set_name(backbone);
  if (k == 1) {
    spec.set_arch(xmod::v1::DENSE);
    return spec;
  }
  spec.set_arch(xmod::v1::XMOD);
  spec.set_k(k);
  spec.set_a(a);
  spec.set_n0(n0);
  return spec;
}

absl::StatusOr<Accounting> AccountConfig(const std::string& backbone, int k, double a, int seq_len,
                                         int n0) {
  absl::StatusOr<Accounting> acc = Account(XmodSpec(backbone, k, a, n0), seq_len);
  if (!acc.ok()) {
    return absl::Status(acc.status().code(),
                        absl::StrCat("backbone=", backbone, " K=", k, " A=", a, " L=", seq_len,
                                     ": ", acc.status().message()));
  }
  return acc;
}

// Parses a trailing size like "556M", "1.65B", "2m", "500k" from a preset name.
bool ParseSizeSuffix(const std::string& name, double* size) {
  size_t end = name.size();
  if (end < 2) return false;
  const char unit = static_cast<char>(std::tolower(static_cast<unsigned char>(name[end - 1])));
  double scale = 0;
  if (unit == 'k') scale = 1e3;
  if (unit == 'm') scale = 1e6;
  if (unit == 'b' || unit == 'g') scale = 1e9;
  if (scale == 0) return false;
  size_t begin = end - 1;
  while (begin > 0 &&
         (std::isdigit(static_cast<unsigned char>(name[begin - 1])) || name[begin - 1] == '.')) {
    --begin;
  }
  if (begin == end - 1) return false;
  const std::string digits = name.substr(begin, end - 1 - begin);
  char* parse_end = nullptr;
  const double value = std::strtod(digits.c_str(), &parse_end);
  if (parse_end != digits.c_str() + digits.size() || !(value > 0)) return false;
  *size = value * scale;
  return true;
}

}  // namespace

absl::StatusOr<double> NominalActiveParams(const std::string& backbone) {
  double size = 0;
  if (ParseSizeSuffix(backbone, &size)) {
    xmod::v1::BackboneSpec spec;
    spec.set_name(backbone);
    absl::StatusOr<Backbone> resolved = ResolveBackbone(spec);
    if (!resolved.ok()) return resolved.status();
    return size;
  }
  absl::StatusOr<Accounting> dense = AccountConfig(backbone, 1, 1, 1, kDefaultN0);
  if (!dense.ok()) return dense.status();
  return dense->total_params;
}

absl::StatusOr<std::string> NearestPreset(double n_act) {
  if (!(n_act > 0) || !std::isfinite(n_act)) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_act must be a positive parameter count, got ", n_act));
  }
  std::string best;
  double best_distance = 0;
  for (const std::string& name : BackbonePresetNames()) {
    absl::StatusOr<double> size = NominalActiveParams(name);
    if (!size.ok()) continue;
    const double distance = std::fabs(std::log(*size / n_act));
    if (best.empty() || distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  if (best.empty() || best_distance > std::log(1.1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n_act=", n_act, ": no backbone preset within 10% (nearest: ", best.empty() ? "none" : best,
        ")"));
  }
  return best;
}

absl::StatusOr<double> CapacityRatio(const std::string& backbone, int k, double a, int seq_len,
                                     int n0) {
  if (k == 1) return 1.0;
  absl::StatusOr<Accounting> acc = AccountConfig(backbone, k, a, seq_len, n0);
  if (!acc.ok()) return acc.status();
  if (!(acc->active_params > 0)) {
    return absl::InternalError(absl::StrCat("backbone=", backbone, ": active params are 0"));
  }
  return acc->per_layer_params * acc->layers / acc->active_params;
}

absl::StatusOr<double> TotalParams(const std::string& backbone, int k, double a, int seq_len,
                                   int n0) {
  absl::StatusOr<Accounting> acc = AccountConfig(backbone, k, a, seq_len, n0);
  if (!acc.ok()) return acc.status();
  return acc->total_params;
}

absl::StatusOr<TokenExposure> ExposureOf(const std::string& backbone, int k, double a, int seq_len,
                                         int n0) {
  absl::StatusOr<Accounting> dense = AccountConfig(backbone, 1, 1, seq_len, n0);
  if (!dense.ok()) return dense.status();
  absl::StatusOr<Accounting> plan = AccountConfig(backbone, k, a, seq_len, n0);
  if (!plan.ok()) return plan.status();
  if (!(dense->train_flops_per_token > 0 && plan->train_flops_per_token > 0)) {
    return absl::InternalError(
        absl::StrCat("backbone=", backbone, " L=", seq_len, ": FLOPs per token are 0"));
  }
  TokenExposure out;
  out.ratio = dense->train_flops_per_token / plan->train_flops_per_token;
  out.dense_tokens_per_flop = 1.0 / dense->train_flops_per_token;
  return out;
}

}  // namespace xmod::fitter
