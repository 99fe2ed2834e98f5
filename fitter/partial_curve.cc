// The partial-curve model: fit from completed curves, forecast of a partial one. See
// partial_curve.h.
#include "fitter/partial_curve.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace xmod::fitter {
namespace {

// α searched: learning curves' compute exponents lie well inside this range.
constexpr double kAlphas[] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.25, 1.5};

absl::Status CheckCurve(const std::vector<DeltaMark>& curve) {
  for (const DeltaMark& p : curve) {
    if (!(p.fraction > 0 && p.fraction <= 1 + 1e-9)) {
      return absl::InvalidArgumentError(
          absl::StrCat("curve point: fraction must be in (0, 1], got ", p.fraction));
    }
    if (!std::isfinite(p.delta)) {
      return absl::InvalidArgumentError("curve point: delta must be finite");
    }
  }
  return absl::OkStatus();
}

// Δ at f = 1 of a completed curve (its last mark).
double FinalOf(const std::vector<DeltaMark>& curve) { return curve.back().delta; }

bool Usable(const std::vector<DeltaMark>& curve) {
  return curve.size() >= 3 && std::abs(curve.back().fraction - 1) < 1e-6;
}

// Per-curve least-squares slope b given α (the final mark is Δ(1) exactly: y = Δ − Δ(1)), with
// Σ g² (its precision, times 1/σ²) and the residual sum of squares.
struct SlopeFit {
  double b = 0;
  double sum_g2 = 0;
  double sse = 0;
  int dof = 0;
};

SlopeFit FitSlope(const std::vector<DeltaMark>& curve, double alpha) {
  SlopeFit fit;
  double sum_gy = 0;
  const double end = FinalOf(curve);
  for (size_t i = 0; i + 1 < curve.size(); ++i) {
    const double g = std::pow(curve[i].fraction, -alpha) - 1;
    fit.sum_g2 += g * g;
    sum_gy += g * (curve[i].delta - end);
  }
  fit.b = fit.sum_g2 > 0 ? sum_gy / fit.sum_g2 : 0;
  for (size_t i = 0; i + 1 < curve.size(); ++i) {
    const double g = std::pow(curve[i].fraction, -alpha) - 1;
    const double r = curve[i].delta - end - fit.b * g;
    fit.sse += r * r;
  }
  fit.dof = static_cast<int>(curve.size()) - 2;
  return fit;
}

}  // namespace

double PartialCurveModel::G(double fraction) const { return std::pow(fraction, -alpha) - 1; }

absl::StatusOr<PartialCurveModel> FitPartialCurveModel(
    const std::vector<std::vector<DeltaMark>>& completed) {
  std::vector<const std::vector<DeltaMark>*> curves;
  for (const auto& c : completed) {
    if (absl::Status s = CheckCurve(c); !s.ok()) return s;
    if (Usable(c)) curves.push_back(&c);
  }
  if (static_cast<int>(curves.size()) < kMinCurves) {
    return absl::NotFoundError(absl::StrCat("partial-curve model: ", curves.size(),
                                            " completed curves with 3 or more marks; at least ",
                                            kMinCurves, " needed"));
  }
  PartialCurveModel best;
  double best_sse = std::numeric_limits<double>::infinity();
  for (double alpha : kAlphas) {
    double sse = 0, sum_b = 0, sum_b2 = 0, mean_inv_g2 = 0;
    int dof = 0;
    std::vector<SlopeFit> fits;
    for (const auto* c : curves) fits.push_back(FitSlope(*c, alpha));
    for (const SlopeFit& f : fits) {
      sse += f.sse;
      dof += f.dof;
      sum_b += f.b;
      sum_b2 += f.b * f.b;
      mean_inv_g2 += f.sum_g2 > 0 ? 1 / f.sum_g2 : 0;
    }
    if (!(sse < best_sse)) continue;
    best_sse = sse;
    const double n = static_cast<double>(fits.size());
    PartialCurveModel m;
    m.alpha = alpha;
    m.curves = static_cast<int>(fits.size());
    m.slope_mean = sum_b / n;
    // Each mark's noise enters y twice (the mark's and the final's); σ_mark² ≈ SSE / (2 dof).
    m.mark_sd = std::max(kMinMarkSd, dof > 0 ? std::sqrt(sse / (2.0 * dof)) : kMinMarkSd);
    const double var_b = (sum_b2 - n * m.slope_mean * m.slope_mean) / std::max(1.0, n - 1);
    const double noise_part = 2 * m.mark_sd * m.mark_sd * mean_inv_g2 / n;
    m.slope_sd = std::max(kMinSlopeSd, std::sqrt(std::max(0.0, var_b - noise_part)));
    best = m;
  }
  return best;
}

absl::StatusOr<Forecast> ForecastFinal(const PartialCurveModel& model,
                                       const std::vector<DeltaMark>& curve) {
  if (curve.empty()) return absl::InvalidArgumentError("partial curve: no points");
  if (absl::Status s = CheckCurve(curve); !s.ok()) return s;
  // Posterior of (D, b) for y_i = D + b g_i + ε_i, ε ~ N(0, σ²), b ~ N(μ, τ²), flat on D.
  const double s2 = model.mark_sd * model.mark_sd;
  const double t2 = model.slope_sd * model.slope_sd;
  double n = 0, sg = 0, sg2 = 0, sy = 0, sgy = 0;
  Forecast out;
  for (const DeltaMark& p : curve) {
    const double g = model.G(p.fraction);
    n += 1;
    sg += g;
    sg2 += g * g;
    sy += p.delta;
    sgy += g * p.delta;
    out.last_fraction = std::max(out.last_fraction, p.fraction);
  }
  // Precision matrix P = [[n, sg], [sg, sg2 + s2/t2]] / s2 and P·(D, b) = (sy, sgy + μ s2/t2)/s2.
  const double p00 = n, p01 = sg, p11 = sg2 + s2 / t2;
  const double r0 = sy, r1 = sgy + model.slope_mean * s2 / t2;
  const double det = p00 * p11 - p01 * p01;
  out.mean = (p11 * r0 - p01 * r1) / det;
  out.sd = std::sqrt(s2 * p11 / det);
  return out;
}

bool ConfidentlyWorse(const Forecast& forecast, double best_final, double margin, double z) {
  return forecast.mean - z * forecast.sd > best_final + margin;
}

}  // namespace xmod::fitter
