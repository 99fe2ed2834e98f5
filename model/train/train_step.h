// TrainStep: one optimizer step of xmod-train on one rank — the unit the trainer's loop and
// bench_model both run. A step is two phases and, between them on several ranks, the
// gradient all-reduce:
//   ForwardBackward  zero the gradients, then forward and backward over the micro-batches of
//                    the rank's windows, under the run's autocast, accumulating the mean
//                    losses (loss: next-token cross-entropy; aux: the router and balance
//                    losses) into device tensors;
//   (ranks > 1)      the gradients and losses averaged over the ranks (communicator.h,
//                    grad_reducer.h);
//   Update           clipping, Muon and AdamW at the schedule's rate (parameter_update.h),
//                    then the per-rank counters summed and the MoE bias step.
// Nothing in a step waits for the device: the losses stay device tensors, which the trainer
// reads at logging marks only.
//
// Gradients: an eager step starts without any and releases them after its update, so autograd
// hands each parameter its first gradient buffer as it is (no zero fill, no extra add) and
// nothing holds them between steps. A recorded step needs the same addresses at every replay:
// with graphs they are persistent buffers, allocated once and zeroed in place at every step
// (the MoE experts, which a step may leave without a gradient, keep "no gradient" so that the
// optimizers skip them as before). Measured on the CPU bench (bench_model, d256, L = 1024,
// one thread), persistent buffers made the eager step 4% slower: the accumulation into them
// is one more pass over every gradient.
//
// With graphs (options.graphs: TrainingSpec.cuda_graphs, step_graph.h) each phase is
// recorded once after kWarmupSteps eager steps and replayed after that. The phases then read
// only static buffers: the batch is copied into one allocated at construction, the update's
// per-step numbers are staged into a device tensor (ParameterUpdate::StageScalars), and the
// losses accumulate in place in tensors that keep their addresses. The warm-up steps run the
// same operations as the replays, so a run resumed at any step computes what the
// uninterrupted run computes.
//
// Legend: B = the rank's windows of a step, T = seq_len. Not thread-safe; one per run.
#ifndef XMOD_MODEL_TRAIN_TRAIN_STEP_H_
#define XMOD_MODEL_TRAIN_TRAIN_STEP_H_

#include <torch/torch.h>

#include <array>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/autocast.h"
#include "model/train/communicator.h"
#include "model/train/grad_reducer.h"
#include "model/train/parameter_update.h"
#include "model/train/step_graph.h"
#include "model/transformer.h"

namespace xmod {

struct TrainStepOptions {
  int64_t seq_len = 0;     // T
  int64_t rows = 0;        // B: this rank's windows of a step
  int64_t micro_rows = 0;  // windows per forward/backward pass (1..B)
  AutocastState autocast;  // bf16 mixed precision around each forward, when enabled
};

// The rank's mean losses of a step: () float64 on the model's device.
struct StepLosses {
  torch::Tensor loss;  // next-token cross-entropy
  torch::Tensor aux;   // weighted auxiliary losses (router BCE, MoE balance)
};

class TrainStep {
 public:
  // Eager phases before the first recording: lazy set-up happens outside it.
  static constexpr int kWarmupSteps = 2;

  // `model` on its device in training mode. `update` runs the Update phase (may be null for a
  // caller that runs ForwardBackward only). `comm` (world_size > 1 only; else null) averages
  // the gradients, through `reducer` when it is set (armed before the last micro-batch's
  // backward); `per_rank_counters` are summed over the ranks after each update. `graphs`
  // records and replays the phases; null = every phase eager. All pointers outlive the step.
  TrainStep(Transformer model, ParameterUpdate* update, const TrainStepOptions& options,
            std::unique_ptr<StepGraphs> graphs = nullptr, Communicator* comm = nullptr,
            OverlappedGradientReducer* reducer = nullptr,
            std::vector<torch::Tensor> per_rank_counters = {});

  // The whole step on `batch` (B, T + 1) int64 windows (inputs and their next tokens) at the
  // schedule's `multiplier`. Returns the losses (the global means over the ranks), still on
  // the device and overwritten by the next step. UNAVAILABLE if a collective fails.
  absl::StatusOr<StepLosses> Run(const torch::Tensor& batch, double multiplier);

  // The phases alone, as bench_model times them (one rank): ForwardBackward leaves the
  // gradients and losses(); Update applies them.
  void ForwardBackward(const torch::Tensor& batch);
  void Update(double multiplier);
  const StepLosses& losses() const { return losses_; }

  bool graphs() const { return graphs_ != nullptr; }
  int recordings() const { return recordings_; }  // phases recorded so far
  int replays() const { return replays_; }        // phases replayed so far

 private:
  enum Phase { kForwardBackward = 0, kUpdate = 1 };

  // `body` eagerly, or through the recordings: kWarmupSteps warm-up runs, then one capture
  // and a replay at every call.
  void RunPhase(Phase phase, const std::function<void()>& body);
  // The ForwardBackward phase on the windows in `batch` (B, T + 1) int64 on the device.
  void ForwardBackwardOn(const torch::Tensor& batch);
  // With graphs: zeroes the persistent gradient buffers in place, the MoE experts' become
  // undefined. Eager: ReleaseGradients.
  void ZeroGradients();
  // Every parameter's gradient becomes undefined (eager steps, after the update).
  void ReleaseGradients();
  // Ranks > 1: the mean gradients and losses over the ranks.
  absl::Status AverageOverRanks();

  Transformer model_;
  ParameterUpdate* update_;
  TrainStepOptions options_;
  std::unique_ptr<StepGraphs> graphs_;
  Communicator* comm_;
  OverlappedGradientReducer* reducer_;
  std::vector<torch::Tensor> per_rank_counters_;
  torch::Device device_;                    // the model's
  std::vector<torch::Tensor> gradients_;    // with graphs: every parameter's but the experts'
  std::vector<torch::Tensor> may_miss_;     // MoE experts' parameters
  StepLosses losses_;                       // accumulated in place, () float64 each
  torch::Tensor batch_;                     // with graphs: (B, T + 1) int64 the phase reads
  torch::Tensor scalars_;                   // with graphs: ParameterUpdate::MakeScalars()
  std::array<int, 2> phase_runs_ = {0, 0};  // calls per phase
  int recordings_ = 0;
  int replays_ = 0;
};

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_TRAIN_STEP_H_
