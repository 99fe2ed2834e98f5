// xmod-train's parameter update, one place for the trainer and bench_model: the global
// gradient norm clipped to training.grad_clip, then Muon on the body's matrices and AdamW on
// the rest (training.optimizer = "muon", paper Table 5), or AdamW on every parameter
// ("adamw"). Muon's Newton–Schulz products run in bfloat16 under bf16 autocast
// (MuonIterationDtype). Under "adamw" Muon holds no parameters, so a checkpoint always has
// both optimizers' sections.
//
// Not thread-safe; one per trainer.
#ifndef XMOD_MODEL_TRAIN_PARAMETER_UPDATE_H_
#define XMOD_MODEL_TRAIN_PARAMETER_UPDATE_H_

#include <torch/torch.h>

#include <vector>

#include "model/autocast.h"
#include "model/train/adamw.h"
#include "model/train/muon.h"
#include "model/transformer.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

class ParameterUpdate {
 public:
  // `training` is resolved (ResolveTraining): optimizer, lr, adamw_lr, weight_decay, grad_clip.
  ParameterUpdate(Transformer& model, const xmod::v1::TrainingSpec& training,
                  const AutocastState& autocast);

  // One update with the learning rates scaled by the schedule's `multiplier`.
  void Step(double multiplier);

  // The same update in a form that one recording of its kernels (a CUDA graph, train_step.h)
  // serves at every step: every number that changes from step to step — the scheduled
  // learning rates and AdamW's bias corrections — is read on the device from `scalars`
  // (MakeScalars: kScalars float64 on the parameters' device) instead of being passed to the
  // kernels. StageScalars computes this step's numbers on the host, advances AdamW's step
  // count and copies them into `scalars` without waiting for the device; StepOnDevice reads
  // them there. Together they compute what Step computes (AdamW operation for operation, Muon
  // to float32 rounding).
  static constexpr int kScalars = 5;
  torch::Tensor MakeScalars() const;
  void StageScalars(double multiplier, torch::Tensor& scalars);
  void StepOnDevice(const torch::Tensor& scalars);

  Muon& muon() { return muon_; }
  AdamW& adamw() { return adamw_; }

 private:
  std::vector<torch::Tensor> parameters_;  // every parameter of the model, for clipping
  torch::Device device_;
  double lr_, adamw_lr_, grad_clip_;
  Muon muon_;
  AdamW adamw_;
};

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_PARAMETER_UPDATE_H_
