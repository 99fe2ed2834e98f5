// Gradient all-reduce overlapped with backward: see grad_reducer.h.
#include "model/train/grad_reducer.h"

#include <utility>

namespace xmod {

OverlappedGradientReducer::OverlappedGradientReducer(Communicator* comm,
                                                     std::vector<torch::Tensor> parameters,
                                                     int64_t bucket_bytes)
    : comm_(comm), parameters_(std::move(parameters)), slots_(parameters_.size()) {
  // Buckets in reverse parameter order, one dtype each, at most bucket_bytes (or one tensor).
  int64_t bytes = 0;
  for (size_t n = parameters_.size(); n-- > 0;) {
    const torch::Tensor& p = parameters_[n];
    const int64_t size = p.numel() * p.element_size();
    const bool fits =
        !buckets_.empty() && bytes + size <= bucket_bytes &&
        parameters_[buckets_.back().parameters.front()].scalar_type() == p.scalar_type();
    if (!fits) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& bucket = buckets_.back();
    slots_[n] = {static_cast<int>(buckets_.size() - 1), bytes / p.element_size()};
    bucket.parameters.push_back(n);
    bytes += size;
  }
  for (Bucket& bucket : buckets_) {
    int64_t elements = 0;
    for (size_t n : bucket.parameters) elements += parameters_[n].numel();
    const torch::Tensor& first = parameters_[bucket.parameters.front()];
    bucket.buffer = torch::zeros({elements}, first.options().requires_grad(false));
    bucket.arrived.assign(bucket.parameters.size(), false);
  }
  for (size_t n = 0; n < parameters_.size(); ++n) {
    hook_handles_.push_back(parameters_[n].register_hook([this, n](const torch::Tensor& grad) {
      OnGradient(n, grad);
      return grad;
    }));
  }
}

OverlappedGradientReducer::~OverlappedGradientReducer() {
  for (size_t n = 0; n < parameters_.size(); ++n) parameters_[n].remove_hook(hook_handles_[n]);
}

void OverlappedGradientReducer::Arm() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = true;
  next_bucket_ = 0;
  launch_status_ = absl::OkStatus();
  for (Bucket& bucket : buckets_) {
    bucket.pending = bucket.parameters.size();
    bucket.arrived.assign(bucket.parameters.size(), false);
    bucket.work.reset();
  }
}

void OverlappedGradientReducer::OnGradient(size_t index, const torch::Tensor& grad) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!armed_) return;
  torch::NoGradGuard no_grad;
  const Slot& slot = slots_[index];
  Bucket& bucket = buckets_[slot.bucket];
  const torch::Tensor& p = parameters_[index];
  torch::Tensor view = bucket.buffer.narrow(0, slot.offset, p.numel()).view(p.sizes());
  // The step's gradient: earlier micro-batches (already in .grad) plus this one.
  if (p.grad().defined()) {
    torch::add_out(view, p.grad(), grad);
  } else {
    view.copy_(grad);
  }
  for (size_t e = 0; e < bucket.parameters.size(); ++e) {
    if (bucket.parameters[e] == index && !bucket.arrived[e]) {
      bucket.arrived[e] = true;
      --bucket.pending;
    }
  }
  LaunchReady();
}

void OverlappedGradientReducer::LaunchReady() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Launch(buckets_[next_bucket_]);
    ++next_bucket_;
  }
}

void OverlappedGradientReducer::Launch(Bucket& bucket) {
  absl::StatusOr<std::shared_ptr<CollectiveWork>> work = comm_->StartAllReduceSum(bucket.buffer);
  if (!work.ok()) {
    if (launch_status_.ok()) launch_status_ = work.status();
    return;
  }
  bucket.work = *std::move(work);
}

absl::Status OverlappedGradientReducer::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  torch::NoGradGuard no_grad;
  // Parameters that got no gradient in the last micro-batch: .grad so far, or zero.
  for (Bucket& bucket : buckets_) {
    for (size_t e = 0; e < bucket.parameters.size(); ++e) {
      if (bucket.arrived[e]) continue;
      const size_t n = bucket.parameters[e];
      const torch::Tensor& p = parameters_[n];
      torch::Tensor view = bucket.buffer.narrow(0, slots_[n].offset, p.numel()).view(p.sizes());
      if (p.grad().defined()) {
        view.copy_(p.grad());
      } else {
        view.zero_();
      }
      bucket.arrived[e] = true;
      --bucket.pending;
    }
  }
  LaunchReady();
  armed_ = false;
  absl::Status status = launch_status_;
  const double scale = 1.0 / comm_->world_size();
  for (Bucket& bucket : buckets_) {
    if (bucket.work == nullptr) continue;
    absl::Status waited = bucket.work->Wait();
    if (status.ok()) status = waited;
  }
  if (!status.ok()) return status;
  for (Bucket& bucket : buckets_) {
    bucket.buffer.mul_(scale);
    for (size_t n : bucket.parameters) {
      torch::Tensor& p = parameters_[n];
      torch::Tensor mean = bucket.buffer.narrow(0, slots_[n].offset, p.numel()).view(p.sizes());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(mean);
      } else {
        p.mutable_grad() = mean.clone();
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace xmod
