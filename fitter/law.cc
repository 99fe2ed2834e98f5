// Eq. 14 of the paper: features and prediction. See law.h.
#include "fitter/law.h"

#include <cmath>

namespace xmod::fitter {

double& ParamAt(LawParams& p, int index) {
  switch (index) {
    case 0:
      return p.e;
    case 1:
      return p.u;
    case 2:
      return p.eta_n;
    case 3:
      return p.rho_n;
    case 4:
      return p.w;
    case 5:
      return p.eta_l;
    case 6:
      return p.rho_l;
    case 7:
      return p.z;
    case 8:
      return p.rho_k;
    case 9:
      return p.rho_a;
    case 10:
      return p.v;
    case 11:
      return p.eta_d;
    default:
      return p.rho_d;
  }
}

double ParamAt(const LawParams& p, int index) { return ParamAt(const_cast<LawParams&>(p), index); }

LawParams Table8Params() {
  LawParams p;
  p.e = 0.01848;
  p.u = 0.93519;
  p.eta_n = 0.07784;
  p.rho_n = 1.19538;
  p.w = 105.21108;
  p.eta_l = 0.92624;
  p.rho_l = 0.48494;
  p.z = 0.07455;
  p.rho_k = 0.79900;
  p.rho_a = 0.28293;
  return p;
}

double AnchorShare(double a) { return 2.0 * a / (a + 1.0); }

LawFeatures ComputeFeatures(const LawPoint& x, const LawParams& p) {
  const double log_k = std::log(x.k);
  LawFeatures f;
  f.r_n = std::exp(-p.eta_n * std::log(x.n_act)) *
          (1.0 - std::exp(-p.rho_n * std::log(x.capacity_ratio)));
  f.p_l = std::exp(-p.eta_l * std::log(x.seq_len)) * std::expm1(p.rho_l * log_k);
  f.r_ak = std::expm1(p.rho_k * log_k) * std::expm1(p.rho_a * std::log(AnchorShare(x.a)));
  if (x.dense_tokens > 0) {
    f.p_d = std::exp(-p.eta_d * std::log(x.dense_tokens / kTokenUnit)) *
            std::expm1(-p.rho_d * std::log(x.exposure));
  }
  return f;
}

double PredictDelta(const LawParams& p, const LawPoint& x) {
  const LawFeatures f = ComputeFeatures(x, p);
  const double reduced = p.e - p.u * f.r_n + p.w * f.p_l - p.z * f.r_ak;
  return p.v == 0 ? reduced : reduced + p.v * f.p_d;
}

double ApproximateOptimumK(const LawParams& p, double n_act, double seq_len, double kappa) {
  if (!(p.u > 0 && p.w > 0 && p.rho_n > 0 && p.rho_l > 0 && kappa > 0)) return 0.0;
  const double c_n = p.u * std::pow(kappa, -p.rho_n);
  const double c_l = p.w;
  const double reward = p.rho_n * c_n * std::pow(n_act, -p.eta_n);
  const double correction = p.rho_l * c_l * std::pow(seq_len, -p.eta_l);
  return std::pow(reward / correction, 1.0 / (p.rho_n + p.rho_l));
}

double CandidateDelta(const LawParams& p, const LawPoint& x) {
  return x.k == 1.0 ? 0.0 : PredictDelta(p, x);
}

}  // namespace xmod::fitter
