// Muon for the matrix parameters of the body (paper Table 5): Nesterov momentum (β 0.95),
// the momentum-corrected gradient orthogonalized by 5 Newton–Schulz iterations with
// coefficients (3.4445, −4.7750, 2.0315), the update scaled by 0.2·√max(rows, cols)
// ("RMS match": the update's RMS matches AdamW's typical 0.2), and decoupled weight decay
// 0.1 — the form of Liu et al., "Muon is Scalable for LLM Training" (Moonlight):
//   m ← β m + g;  u ← NS5(g + β m);  W ← W (1 − lr λ) − lr · 0.2 √max(r, c) · u.
// Parameters of more than two dimensions (e.g. stacked experts, (E, R, C)) are treated as a
// batch of matrices over their last two dimensions. Iterations run in float32.
//
// Not thread-safe; one instance per trainer.
#ifndef XMOD_MODEL_TRAIN_MUON_H_
#define XMOD_MODEL_TRAIN_MUON_H_

#include <torch/torch.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace xmod {

struct MuonOptions {
  double momentum = 0.95;  // β
  bool nesterov = true;
  int ns_steps = 5;
  double rms_match = 0.2;
  double weight_decay = 0.1;  // λ, decoupled (multiplied by lr)
};

// The quintic Newton–Schulz iteration of Muon: `steps` iterations of
//   X ← a X + (b A + c A²) X,  A = X Xᵀ,  (a, b, c) = (3.4445, −4.7750, 2.0315),
// from X = G / (‖G‖_F + 1e-7), run on the wide orientation. Returns an approximately
// orthogonal matrix (singular values in roughly [0.7, 1.2]) with G's singular vectors.
// g: (..., R, C), any float dtype; result: float32, same shape.
torch::Tensor NewtonSchulz5(const torch::Tensor& g, int steps);

// 0.2·√max(rows, cols) for rms_match = 0.2 (Table 5): the factor on the orthogonalized update.
double MuonUpdateScale(int64_t rows, int64_t cols, double rms_match);

class Muon {
 public:
  // `params`: tensors of >= 2 dimensions. Momentum buffers start at zero.
  Muon(std::vector<torch::Tensor> params, MuonOptions options);

  // One update at learning rate `lr`. Parameters without a gradient are left untouched.
  void Step(double lr);
  void ZeroGrad();

  // Momentum buffers under "<prefix>/momentum/<i>".
  void Save(torch::serialize::OutputArchive& archive, const std::string& prefix) const;
  // FAILED_PRECONDITION if the archive lacks a buffer or a shape differs.
  absl::Status Load(torch::serialize::InputArchive& archive, const std::string& prefix);

  const std::vector<torch::Tensor>& params() const { return params_; }
  const std::vector<torch::Tensor>& momentum() const { return momentum_; }

 private:
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> momentum_;
  MuonOptions options_;
};

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_MUON_H_
