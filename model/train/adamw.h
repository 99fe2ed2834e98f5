// AdamW for the parameters Muon does not take: embeddings, head, norms and scalars
// (paper Table 5: betas (0.9, 0.95), epsilon 1e-8). The same arithmetic as
// torch::optim::AdamW, written out so its state (step count and moments) is saved and
// restored explicitly with the rest of a checkpoint. Decoupled weight decay applies to
// tensors of two or more dimensions only (embeddings, head); norms, gates and other vectors
// and scalars are not decayed.
//
// Not thread-safe; one instance per trainer.
#ifndef XMOD_MODEL_TRAIN_ADAMW_H_
#define XMOD_MODEL_TRAIN_ADAMW_H_

#include <torch/torch.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace xmod {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // decoupled, multiplied by lr; matrices only
};

class AdamW {
 public:
  AdamW(std::vector<torch::Tensor> params, AdamWOptions options);

  // One update at learning rate `lr`; parameters without a gradient are left untouched.
  void Step(double lr);

  // The numbers of the next update at learning rate `lr`, which advances the step count:
  // decay = 1 − lr λ, step = −lr / (1 − β1^t), sqrt_bias2 = √(1 − β2^t).
  struct DeviceScalars {
    double decay, step, sqrt_bias2;
  };
  DeviceScalars Advance(double lr);
  // The update of Step with those numbers read on the device (0-dim tensors on the
  // parameters' device), for a step recorded once and replayed (a CUDA graph); call Advance
  // before each. Computes what Step computes, operation for operation.
  void StepOnDevice(const torch::Tensor& decay, const torch::Tensor& step,
                    const torch::Tensor& sqrt_bias2);
  void ZeroGrad();

  // Step count and moments under "<prefix>/...".
  void Save(torch::serialize::OutputArchive& archive, const std::string& prefix) const;
  // FAILED_PRECONDITION if the archive lacks a tensor or a shape differs.
  absl::Status Load(torch::serialize::InputArchive& archive, const std::string& prefix);

  const std::vector<torch::Tensor>& params() const { return params_; }
  int64_t steps() const { return steps_; }

 private:
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> exp_avg_;     // first moments
  std::vector<torch::Tensor> exp_avg_sq_;  // second moments
  int64_t steps_ = 0;
  AdamWOptions options_;
};

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_ADAMW_H_
