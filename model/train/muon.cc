// Muon: Newton–Schulz orthogonalized Nesterov momentum (paper Table 5).
#include "model/train/muon.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace xmod {

torch::Tensor NewtonSchulz5(const torch::Tensor& g, int steps, torch::Dtype dtype) {
  constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;
  TORCH_CHECK(g.dim() >= 2, "Newton-Schulz needs a matrix, got ", g.dim(), " dimensions");
  const bool tall = g.size(-2) > g.size(-1);
  torch::Tensor x = tall ? g.transpose(-2, -1) : g;  // (..., r, c) with r <= c
  const int64_t r = x.size(-2), c = x.size(-1);
  x = x.to(torch::kFloat32).reshape({-1, r, c});  // (n, r, c)
  x = (x / (at::linalg_vector_norm(x, 2, {-2, -1}, /*keepdim=*/true) + 1e-7)).to(dtype);
  for (int i = 0; i < steps; ++i) {
    torch::Tensor a = torch::bmm(x, x.transpose(1, 2));                    // (n, r, r)
    torch::Tensor b = torch::baddbmm(a, a, a, /*beta=*/kB, /*alpha=*/kC);  // b A + c A²
    x = torch::baddbmm(x, b, x, /*beta=*/kA, /*alpha=*/1);                 // a X + B X
  }
  std::vector<int64_t> shape = g.sizes().vec();
  if (tall) std::swap(shape[shape.size() - 2], shape[shape.size() - 1]);
  x = x.to(torch::kFloat32).reshape(shape);
  return tall ? x.transpose(-2, -1) : x;
}

torch::Dtype MuonIterationDtype(const AutocastState& autocast) {
  return autocast.enabled && autocast.dtype == torch::kBFloat16 ? torch::kBFloat16
                                                                : torch::kFloat32;
}

double MuonUpdateScale(int64_t rows, int64_t cols, double rms_match) {
  return rms_match * std::sqrt(static_cast<double>(std::max(rows, cols)));
}

Muon::Muon(std::vector<torch::Tensor> params, MuonOptions options)
    : params_(std::move(params)), options_(options) {
  // (shape, dtype, device) -> index into batches_, for the batches still open.
  std::map<std::string, size_t> open;
  for (size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& p = params_[i];
    TORCH_CHECK(p.dim() >= 2, "Muon parameter of shape ", p.sizes(), " is not a matrix");
    momentum_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    const std::string key = absl::StrCat(c10::str(p.sizes()), "/", c10::toString(p.scalar_type()),
                                         "/", p.device().str());
    auto it = open.find(key);
    const int64_t bytes = p.numel() * static_cast<int64_t>(sizeof(float));
    if (it == open.end() ||
        static_cast<int64_t>(batches_[it->second].size() + 1) * bytes > options_.batch_bytes) {
      it = open.insert_or_assign(key, batches_.size()).first;
      batches_.emplace_back();
    }
    batches_[it->second].push_back(i);
  }
}

torch::Tensor Muon::Directions(const std::vector<size_t>& batch,
                               std::vector<torch::Tensor>* params) {
  std::vector<torch::Tensor> grads, momenta;
  for (size_t i : batch) {
    if (!params_[i].grad().defined()) continue;
    params->push_back(params_[i]);
    grads.push_back(params_[i].grad());
    momenta.push_back(momentum_[i]);
  }
  if (params->empty()) return torch::Tensor();
  torch::_foreach_mul_(momenta, options_.momentum);  // m ← β m + g
  torch::_foreach_add_(momenta, grads);
  // (n, ..., R, C): the batch's directions, written in place into one stack and
  // orthogonalized together, each matrix on its own.
  std::vector<int64_t> stacked_shape = params->front().sizes().vec();
  stacked_shape.insert(stacked_shape.begin(), static_cast<int64_t>(params->size()));
  torch::Tensor directions = torch::empty(stacked_shape, momenta.front().options());
  for (size_t j = 0; j < params->size(); ++j) {
    torch::Tensor slot = directions[static_cast<int64_t>(j)];
    if (options_.nesterov) {
      torch::add_out(slot, grads[j], momenta[j], options_.momentum);  // g + β m
    } else {
      slot.copy_(momenta[j]);
    }
  }
  return NewtonSchulz5(directions, options_.ns_steps, options_.ns_dtype);
}

void Muon::ForEachBatch(
    const std::function<void(std::vector<torch::Tensor>&, torch::Tensor&, double)>& update) {
  torch::NoGradGuard no_grad;
  for (const std::vector<size_t>& batch : batches_) {
    std::vector<torch::Tensor> params;
    torch::Tensor u = Directions(batch, &params);  // (n, ..., R, C)
    if (params.empty()) continue;
    const torch::Tensor& p0 = params.front();
    u = u.to(p0.dtype());
    update(params, u, MuonUpdateScale(p0.size(-2), p0.size(-1), options_.rms_match));
  }
}

void Muon::Step(double lr) {
  ForEachBatch([&](std::vector<torch::Tensor>& params, torch::Tensor& u, double scale) {
    torch::_foreach_mul_(params, 1.0 - lr * options_.weight_decay);
    torch::_foreach_add_(params, u.unbind(0), -lr * scale);
  });
}

void Muon::StepOnDevice(const torch::Tensor& decay, const torch::Tensor& neg_lr) {
  ForEachBatch([&](std::vector<torch::Tensor>& params, torch::Tensor& u, double scale) {
    // In the parameters' dtype: a float64 factor would take _foreach_mul_'s slow path.
    torch::_foreach_mul_(params, decay.to(params.front().scalar_type()));
    torch::_foreach_add_(params, u.mul_(neg_lr * scale).unbind(0));
  });
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
