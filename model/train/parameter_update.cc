// The trainer's parameter update: clipping, then Muon and AdamW (see parameter_update.h).
#include "model/train/parameter_update.h"

#include <vector>

#include "model/train/grad_clip.h"

namespace xmod {
namespace {

bool UsesMuon(const xmod::v1::TrainingSpec& training) { return training.optimizer() == "muon"; }

MuonOptions MuonOptionsFor(const xmod::v1::TrainingSpec& training, const AutocastState& autocast) {
  MuonOptions muon;
  muon.weight_decay = training.weight_decay();
  muon.ns_dtype = MuonIterationDtype(autocast);
  return muon;
}

}  // namespace

ParameterUpdate::ParameterUpdate(Transformer& model, const xmod::v1::TrainingSpec& training,
                                 const AutocastState& autocast)
    : parameters_(model->parameters()),
      device_(parameters_.empty() ? torch::Device(torch::kCPU) : parameters_.front().device()),
      lr_(training.lr()),
      // AdamW takes the run's lr when it updates every parameter.
      adamw_lr_(UsesMuon(training) ? training.adamw_lr() : training.lr()),
      grad_clip_(training.grad_clip()),
      muon_(UsesMuon(training) ? model->MuonParameters() : std::vector<torch::Tensor>{},
            MuonOptionsFor(training, autocast)),
      adamw_(UsesMuon(training) ? model->AdamWParameters() : parameters_,
             AdamWOptions{0.9, 0.95, 1e-8, training.weight_decay()}) {}

void ParameterUpdate::Step(double multiplier) {
  if (grad_clip_ > 0) ClipGradNorm(parameters_, grad_clip_);
  muon_.Step(lr_ * multiplier);
  adamw_.Step(adamw_lr_ * multiplier);
}

torch::Tensor ParameterUpdate::MakeScalars() const {
  return torch::zeros({kScalars}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
}

void ParameterUpdate::StageScalars(double multiplier, torch::Tensor& scalars) {
  const double lr = lr_ * multiplier;
  const AdamW::DeviceScalars adamw = adamw_.Advance(adamw_lr_ * multiplier);
  // (kScalars): Muon's decay and -lr, then AdamW's decay, step and sqrt(bias2).
  torch::Tensor host = torch::tensor(
      {1.0 - lr * muon_.weight_decay(), -lr, adamw.decay, adamw.step, adamw.sqrt_bias2},
      torch::kFloat64);
  if (scalars.is_cuda()) host = host.pin_memory();  // the copy may run after this returns
  scalars.copy_(host, /*non_blocking=*/true);
}

void ParameterUpdate::StepOnDevice(const torch::Tensor& scalars) {
  if (grad_clip_ > 0) ClipGradNorm(parameters_, grad_clip_);
  muon_.StepOnDevice(scalars[0], scalars[1]);
  adamw_.StepOnDevice(scalars[2], scalars[3], scalars[4]);
}

}  // namespace xmod
