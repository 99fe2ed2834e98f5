// One optimizer step: see train_step.h.
#include "model/train/train_step.h"

#include <algorithm>
#include <utility>

namespace xmod {

TrainStep::TrainStep(Transformer model, ParameterUpdate* update, const TrainStepOptions& options,
                     std::unique_ptr<StepGraphs> graphs, Communicator* comm,
                     OverlappedGradientReducer* reducer,
                     std::vector<torch::Tensor> per_rank_counters)
    : model_(std::move(model)),
      update_(update),
      options_(options),
      graphs_(std::move(graphs)),
      comm_(comm),
      reducer_(reducer),
      per_rank_counters_(std::move(per_rank_counters)),
      device_(model_->embed->weight.device()),
      may_miss_(model_->MayMissGradients()) {
  TORCH_CHECK(options_.rows >= 1 && options_.micro_rows >= 1 && options_.seq_len >= 1,
              "TrainStep: rows, micro_rows and seq_len must be >= 1");
  torch::NoGradGuard no_grad;
  const torch::TensorOptions f64 = torch::TensorOptions().dtype(torch::kFloat64).device(device_);
  losses_ = {torch::zeros({}, f64), torch::zeros({}, f64)};
  if (graphs_ == nullptr) return;
  // A recording replays one set of gradients: parameters that may miss theirs (MoE experts)
  // would keep the set of the captured step (StaticTrainingStep excludes MoE from graphs).
  TORCH_CHECK(may_miss_.empty(), "TrainStep: graphs need every parameter to get a gradient");
  for (torch::Tensor p : model_->parameters()) {
    const bool missable = std::any_of(may_miss_.begin(), may_miss_.end(),
                                      [&](const torch::Tensor& m) { return m.is_same(p); });
    if (missable) continue;
    p.mutable_grad() = torch::zeros_like(p, torch::MemoryFormat::Contiguous);
    gradients_.push_back(p.grad());
  }
  batch_ = torch::zeros({options_.rows, options_.seq_len + 1}, f64.dtype(torch::kInt64));
  if (update_ != nullptr) scalars_ = update_->MakeScalars();
}

absl::StatusOr<StepLosses> TrainStep::Run(const torch::Tensor& batch, double multiplier) {
  ForwardBackward(batch);
  if (comm_ != nullptr && comm_->world_size() > 1) {
    absl::Status status = AverageOverRanks();
    if (!status.ok()) return status;
  }
  Update(multiplier);
  absl::Status status = comm_ != nullptr ? comm_->SumTensors(per_rank_counters_) : absl::OkStatus();
  if (!status.ok()) return status;
  model_->AfterOptimizerStep();
  return losses_;
}

void TrainStep::ForwardBackward(const torch::Tensor& batch) {
  TORCH_CHECK(
      batch.dim() == 2 && batch.size(0) == options_.rows && batch.size(1) == options_.seq_len + 1,
      "TrainStep: a batch of ", batch.sizes(), " windows, not (", options_.rows, ", ",
      options_.seq_len + 1, ")");
  if (graphs_ == nullptr) {
    ForwardBackwardOn(batch.to(device_));
    return;
  }
  batch_.copy_(batch, /*non_blocking=*/true);  // pinned host memory or the device
  RunPhase(kForwardBackward, [this] { ForwardBackwardOn(batch_); });
}

void TrainStep::Update(double multiplier) {
  TORCH_CHECK(update_ != nullptr, "TrainStep: Update without a ParameterUpdate");
  if (graphs_ == nullptr) {
    update_->Step(multiplier);
    ReleaseGradients();
    return;
  }
  update_->StageScalars(multiplier, scalars_);  // read by the replay, on the same stream
  RunPhase(kUpdate, [this] { update_->StepOnDevice(scalars_); });
}

void TrainStep::RunPhase(Phase phase, const std::function<void()>& body) {
  int& runs = phase_runs_[phase];
  if (runs < kWarmupSteps) {
    graphs_->Run(body);
  } else {
    if (runs == kWarmupSteps) {
      graphs_->Capture(phase, body);  // StepGraphs checks they come in phase order
      ++recordings_;
    }
    graphs_->Replay(phase);
    ++replays_;
  }
  ++runs;
}

void TrainStep::ForwardBackwardOn(const torch::Tensor& batch) {
  ZeroGradients();
  losses_.loss.zero_();
  losses_.aux.zero_();
  const int64_t rows = options_.rows, t = options_.seq_len;
  for (int64_t b = 0; b < rows; b += options_.micro_rows) {
    const int64_t n = std::min(options_.micro_rows, rows - b);
    torch::Tensor chunk = batch.slice(/*dim=*/0, b, b + n);                 // (n, T + 1)
    torch::Tensor inputs = chunk.slice(/*dim=*/1, 0, t).contiguous();       // (n, T)
    torch::Tensor targets = chunk.slice(/*dim=*/1, 1, t + 1).contiguous();  // (n, T)
    ModelOutput out;
    {
      AutocastGuard autocast(inputs.device().type(), options_.autocast);
      out = model_->forward(inputs, targets, RoutingMode::kTopK);
    }
    const double weight = static_cast<double>(n) / static_cast<double>(rows);
    torch::Tensor total = out.aux_loss.defined() ? out.loss + out.aux_loss : out.loss;
    if (reducer_ != nullptr && b + n >= rows) reducer_->Arm();
    (total * weight).backward();
    torch::NoGradGuard no_grad;
    losses_.loss.add_(out.loss.detach().to(torch::kFloat64) * weight);
    if (out.aux_loss.defined())
      losses_.aux.add_(out.aux_loss.detach().to(torch::kFloat64) * weight);
  }
}

void TrainStep::ZeroGradients() {
  if (graphs_ == nullptr) {
    ReleaseGradients();
    return;
  }
  torch::_foreach_zero_(gradients_);
  for (torch::Tensor& p : may_miss_) p.mutable_grad() = torch::Tensor();
}

void TrainStep::ReleaseGradients() {
  for (torch::Tensor& p : model_->parameters()) {
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
  }
}

absl::Status TrainStep::AverageOverRanks() {
  absl::Status status =
      reducer_ != nullptr ? reducer_->Finish() : comm_->AverageGradients(model_->parameters());
  if (!status.ok()) return status;
  torch::Tensor losses = torch::stack({losses_.loss, losses_.aux});  // (2) float64
  status = comm_->SumTensors({losses});
  if (!status.ok()) return status;
  losses.div_(comm_->world_size());
  losses_.loss.copy_(losses[0]);
  losses_.aux.copy_(losses[1]);
  return absl::OkStatus();
}

}  // namespace xmod
