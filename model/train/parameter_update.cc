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

}  // namespace xmod
