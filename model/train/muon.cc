// Muon: Newton–Schulz orthogonalized Nesterov momentum (paper Table 5).
#include "model/train/muon.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace xmod {

torch::Tensor NewtonSchulz5(const torch::Tensor& g, int steps) {
  constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;
  TORCH_CHECK(g.dim() >= 2, "Newton-Schulz needs a matrix, got ", g.dim(), " dimensions");
  torch::Tensor x = g.to(torch::kFloat32);
  const bool tall = g.size(-2) > g.size(-1);
  if (tall) x = x.transpose(-2, -1);  // (..., r, c) with r <= c
  x = x / (x.square().sum({-2, -1}, /*keepdim=*/true).sqrt() + 1e-7);
  for (int i = 0; i < steps; ++i) {
    torch::Tensor a = torch::matmul(x, x.transpose(-2, -1));  // (..., r, r)
    torch::Tensor b = kB * a + kC * torch::matmul(a, a);      // (..., r, r)
    x = kA * x + torch::matmul(b, x);                         // (..., r, c)
  }
  if (tall) x = x.transpose(-2, -1);
  return x.contiguous();
}

double MuonUpdateScale(int64_t rows, int64_t cols, double rms_match) {
  return rms_match * std::sqrt(static_cast<double>(std::max(rows, cols)));
}

Muon::Muon(std::vector<torch::Tensor> params, MuonOptions options)
    : params_(std::move(params)), options_(options) {
  for (const torch::Tensor& p : params_) {
    TORCH_CHECK(p.dim() >= 2, "Muon parameter of shape ", p.sizes(), " is not a matrix");
    momentum_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
  }
}

void Muon::Step(double lr) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const torch::Tensor& g = p.grad();
    torch::Tensor& m = momentum_[i];
    m.mul_(options_.momentum).add_(g);  // m ← β m + g
    torch::Tensor direction = options_.nesterov ? g.add(m, options_.momentum) : m;
    torch::Tensor u = NewtonSchulz5(direction, options_.ns_steps).to(p.dtype());
    const double scale = MuonUpdateScale(p.size(-2), p.size(-1), options_.rms_match);
    p.mul_(1.0 - lr * options_.weight_decay);
    p.add_(u, -lr * scale);
  }
}

void Muon::ZeroGrad() {
  for (torch::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
  }
}

void Muon::Save(torch::serialize::OutputArchive& archive, const std::string& prefix) const {
  for (size_t i = 0; i < momentum_.size(); ++i) {
    archive.write(absl::StrCat(prefix, "/momentum/", i), momentum_[i]);
  }
}

absl::Status Muon::Load(torch::serialize::InputArchive& archive, const std::string& prefix) {
  for (size_t i = 0; i < momentum_.size(); ++i) {
    torch::Tensor loaded;
    const std::string key = absl::StrCat(prefix, "/momentum/", i);
    if (!archive.try_read(key, loaded)) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint lacks ", key));
    }
    if (loaded.sizes() != momentum_[i].sizes()) {
      return absl::FailedPreconditionError(absl::StrCat(key, ": shape differs from the model"));
    }
    torch::NoGradGuard no_grad;
    momentum_[i].copy_(loaded);
  }
  return absl::OkStatus();
}

}  // namespace xmod
