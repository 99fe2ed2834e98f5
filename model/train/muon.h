// Muon for the matrix parameters of the body (paper Table 5): Nesterov momentum (β 0.95),
// the momentum-corrected gradient orthogonalized by 5 Newton–Schulz iterations with
// coefficients (3.4445, −4.7750, 2.0315), the update scaled by 0.2·√max(rows, cols)
// ("RMS match": the update's RMS matches AdamW's typical 0.2), and decoupled weight decay
// 0.1 — the form of Liu et al., "Muon is Scalable for LLM Training" (Moonlight):
//   m ← β m + g;  u ← NS5(g + β m);  W ← W (1 − lr λ) − lr · 0.2 √max(r, c) · u.
// Parameters of more than two dimensions (e.g. stacked experts, (E, R, C)) are treated as a
// batch of matrices over their last two dimensions. The iteration's products run in float32,
// or in bfloat16 when the run trains in bf16 (MuonOptions::ns_dtype); momentum is float32.
//
// Matrices of one shape are updated as one batch: their Newton–Schulz iterations run as
// batched products over a (n, R, C) stack (at most `batch_bytes` of float32 each), and the
// momentum and weight updates as multi-tensor operations. Each matrix is still
// orthogonalized on its own, so a batch computes what a loop over its matrices would; it
// runs a few large products in place of many small ones (X-MoD multiplies the number of
// same-shaped projections by K).
//
// Not thread-safe; one instance per trainer.
#ifndef XMOD_MODEL_TRAIN_MUON_H_
#define XMOD_MODEL_TRAIN_MUON_H_

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/autocast.h"

namespace xmod {

struct MuonOptions {
  double momentum = 0.95;  // β
  bool nesterov = true;
  int ns_steps = 5;
  // The dtype the Newton–Schulz products run in (the normalisation and the result are
  // float32): bfloat16 where the run trains in bf16, as Muon's reference implementation does.
  torch::Dtype ns_dtype = torch::kFloat32;
  double rms_match = 0.2;
  double weight_decay = 0.1;  // λ, decoupled (multiplied by lr)
  // At most this many float32 bytes of same-shaped matrices are orthogonalized as one batch:
  // bounds the iteration's transient memory (the stack and its products, about 4x this) when
  // a model has hundreds of large projections. A matrix larger than this is a batch alone.
  int64_t batch_bytes = int64_t{64} << 20;
};

// The quintic Newton–Schulz iteration of Muon: `steps` iterations of
//   X ← a X + (b A + c A²) X,  A = X Xᵀ,  (a, b, c) = (3.4445, −4.7750, 2.0315),
// from X = G / (‖G‖_F + 1e-7), run on the wide orientation with its products in `dtype`.
// Returns an approximately orthogonal matrix (singular values in roughly [0.7, 1.2]) with G's
// singular vectors. g: (..., R, C), any float dtype; result: float32, same shape (a
// transposed view when R > C).
torch::Tensor NewtonSchulz5(const torch::Tensor& g, int steps,
                            torch::Dtype dtype = torch::kFloat32);

// The Newton–Schulz dtype of a run whose forward pass runs under `autocast`: bfloat16 when
// it trains in bfloat16, float32 otherwise.
torch::Dtype MuonIterationDtype(const AutocastState& autocast);

// 0.2·√max(rows, cols) for rms_match = 0.2 (Table 5): the factor on the orthogonalized update.
double MuonUpdateScale(int64_t rows, int64_t cols, double rms_match);

class Muon {
 public:
  // `params`: tensors of >= 2 dimensions. Momentum buffers start at zero.
  Muon(std::vector<torch::Tensor> params, MuonOptions options);

  // One update at learning rate `lr`. Parameters without a gradient are left untouched.
  void Step(double lr);
  // The same update with lr read on the device, for a step recorded once and replayed (a CUDA
  // graph): decay = 1 − lr λ and neg_lr = −lr, 0-dim tensors on the parameters' device.
  // Agrees with Step to float32 rounding.
  void StepOnDevice(const torch::Tensor& decay, const torch::Tensor& neg_lr);
  void ZeroGrad();

  // Momentum buffers under "<prefix>/momentum/<i>".
  void Save(torch::serialize::OutputArchive& archive, const std::string& prefix) const;
  // FAILED_PRECONDITION if the archive lacks a buffer or a shape differs.
  absl::Status Load(torch::serialize::InputArchive& archive, const std::string& prefix);

  const std::vector<torch::Tensor>& params() const { return params_; }
  const std::vector<torch::Tensor>& momentum() const { return momentum_; }
  double weight_decay() const { return options_.weight_decay; }

 private:
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> momentum_;
  // Indices into params_ of same-shaped (and same-dtype, same-device) matrices, in order.
  std::vector<std::vector<size_t>> batches_;
  MuonOptions options_;

  // Calls update(params, u, scale) for each batch with a gradient: u (n, ..., R, C) their
  // orthogonalized directions in the parameters' dtype, scale MuonUpdateScale's factor.
  void ForEachBatch(
      const std::function<void(std::vector<torch::Tensor>&, torch::Tensor&, double)>& update);
  // The Nesterov directions of one batch's parameters that have a gradient, orthogonalized:
  // (n, ..., R, C) float32, after the momentum update m ← β m + g. Fills `params`.
  torch::Tensor Directions(const std::vector<size_t>& batch, std::vector<torch::Tensor>* params);
};

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_MUON_H_
