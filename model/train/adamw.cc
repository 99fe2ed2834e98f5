// AdamW with explicit, checkpointable state.
#include "model/train/adamw.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace xmod {

AdamW::AdamW(std::vector<torch::Tensor> params, AdamWOptions options)
    : params_(std::move(params)), options_(options) {
  for (const torch::Tensor& p : params_) {
    exp_avg_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    exp_avg_sq_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
  }
}

void AdamW::Step(double lr) {
  torch::NoGradGuard no_grad;
  const DeviceScalars k = Advance(lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const torch::Tensor& g = p.grad();
    if (p.dim() >= 2) p.mul_(k.decay);
    exp_avg_[i].mul_(options_.beta1).add_(g, 1.0 - options_.beta1);
    exp_avg_sq_[i].mul_(options_.beta2).addcmul_(g, g, 1.0 - options_.beta2);
    torch::Tensor denom = (exp_avg_sq_[i].sqrt() / k.sqrt_bias2).add_(options_.eps);
    p.addcdiv_(exp_avg_[i], denom, k.step);
  }
}

AdamW::DeviceScalars AdamW::Advance(double lr) {
  ++steps_;
  const double bias1 = 1.0 - std::pow(options_.beta1, static_cast<double>(steps_));
  const double bias2 = 1.0 - std::pow(options_.beta2, static_cast<double>(steps_));
  return {1.0 - lr * options_.weight_decay, -lr / bias1, std::sqrt(bias2)};
}

void AdamW::StepOnDevice(const torch::Tensor& decay, const torch::Tensor& step,
                         const torch::Tensor& sqrt_bias2) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const torch::Tensor& g = p.grad();
    if (p.dim() >= 2) p.mul_(decay);
    exp_avg_[i].mul_(options_.beta1).add_(g, 1.0 - options_.beta1);
    exp_avg_sq_[i].mul_(options_.beta2).addcmul_(g, g, 1.0 - options_.beta2);
    torch::Tensor denom = (exp_avg_sq_[i].sqrt() / sqrt_bias2).add_(options_.eps);
    p.addcdiv_(exp_avg_[i] * step, denom);  // p + (step m) / denom, as addcdiv_ with value step
  }
}

void AdamW::ZeroGrad() {
  for (torch::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
  }
}

void AdamW::Save(torch::serialize::OutputArchive& archive, const std::string& prefix) const {
  archive.write(prefix + "/steps", torch::tensor(steps_, torch::kInt64));
  for (size_t i = 0; i < params_.size(); ++i) {
    archive.write(absl::StrCat(prefix, "/exp_avg/", i), exp_avg_[i]);
    archive.write(absl::StrCat(prefix, "/exp_avg_sq/", i), exp_avg_sq_[i]);
  }
}

absl::Status AdamW::Load(torch::serialize::InputArchive& archive, const std::string& prefix) {
  torch::Tensor steps;
  if (!archive.try_read(prefix + "/steps", steps)) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint lacks ", prefix, "/steps"));
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    for (auto* moments : {&exp_avg_, &exp_avg_sq_}) {
      const std::string key =
          absl::StrCat(prefix, moments == &exp_avg_ ? "/exp_avg/" : "/exp_avg_sq/", i);
      torch::Tensor loaded;
      if (!archive.try_read(key, loaded)) {
        return absl::FailedPreconditionError(absl::StrCat("checkpoint lacks ", key));
      }
      if (loaded.sizes() != (*moments)[i].sizes()) {
        return absl::FailedPreconditionError(absl::StrCat(key, ": shape differs from the model"));
      }
      (*moments)[i].copy_(loaded);
    }
  }
  steps_ = steps.item<int64_t>();
  return absl::OkStatus();
}

}  // namespace xmod
