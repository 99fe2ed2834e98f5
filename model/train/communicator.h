// Communicator: the collectives of a data-parallel xmod-train run, over a c10d process group
// (ProcessGroupGloo on CPU tensors; ProcessGroupNCCL on CUDA tensors in builds against a
// CUDA LibTorch with USE_C10D_NCCL). LibTorch's C++ API has no DistributedDataParallel, so
// the trainer calls these between backward and the optimizer step:
//  - gradients are flattened into buckets of at most 64 MiB, all-reduced (sum), divided by
//    world_size and copied back;
//  - loss scalars are summed, the stop request is OR-ed, evaluation results are broadcast
//    from rank 0, and the parameters are compared across ranks by a checksum all-reduce.
// With world_size 1 there is no process group and every collective is the identity, so a
// single process runs exactly as before.
//
// Every collective blocks until all ranks have called it, in the same order (the trainer's
// loop guarantees that); a rank that died makes the others fail with UNAVAILABLE after the
// timeout. Thread-compatible: one thread per rank calls it.
#ifndef XMOD_MODEL_TRAIN_COMMUNICATOR_H_
#define XMOD_MODEL_TRAIN_COMMUNICATOR_H_

#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/train/distributed_options.h"

namespace xmod {

// A collective in flight (Communicator::StartAllReduceSum).
class CollectiveWork {
 public:
  virtual ~CollectiveWork() = default;
  // Blocks until the collective is done (on a CUDA device: until the current stream is
  // ordered after it). UNAVAILABLE if it failed.
  virtual absl::Status Wait() = 0;
};

class Communicator {
 public:
  // Validates `options` (ValidateDistributedOptions) and, for world_size > 1, joins the
  // other ranks through the store; blocks until all have joined. `device` is where the
  // model lives. INVALID_ARGUMENT for bad options, for "nccl" without NCCL support or on a
  // CPU device; UNAVAILABLE if the rendezvous fails or times out.
  static absl::StatusOr<std::unique_ptr<Communicator>> Connect(const DistributedOptions& options,
                                                               torch::Device device);
  ~Communicator();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // Replaces each parameter's gradient by the mean of the ranks' gradients. A parameter
  // without a gradient on some rank counts as zero there; one without a gradient on every
  // rank keeps none (the optimizers then skip it, as in a single process).
  absl::Status AverageGradients(const std::vector<torch::Tensor>& parameters);

  // Starts summing `tensor` over the ranks, in place, and returns at once (world_size > 1;
  // the tensor lives on the collective device). Collectives start in the same order on
  // every rank.
  absl::StatusOr<std::shared_ptr<CollectiveWork>> StartAllReduceSum(torch::Tensor tensor);

  // Whether tensors on `device` can be handed to the collectives as they are (NCCL with CUDA
  // tensors, Gloo with CPU tensors); otherwise they are staged through host memory.
  bool CollectsOn(torch::Device device) const { return device == collective_device_; }

  // Sums each tensor over the ranks, in place (e.g. per-rank counters).
  absl::Status SumTensors(const std::vector<torch::Tensor>& tensors);

  // Sums `values` over the ranks, in place (float64).
  absl::Status SumScalars(std::vector<double>* values);

  // Whether `value` is true on any rank (the same answer on every rank).
  absl::StatusOr<bool> Any(bool value);

  // Replaces `values` by rank 0's (same length on every rank).
  absl::Status BroadcastFromRankZero(std::vector<double>* values);

  // OK if every tensor is bit-identical on all ranks, compared by a checksum all-reduce
  // (per tensor: the sum of its 32-bit words, exact in int64). FAILED_PRECONDITION naming
  // the first tensor that differs (`what` says which kind of tensors, for the message).
  absl::Status CheckIdentical(const std::vector<std::pair<std::string, torch::Tensor>>& named,
                              const std::string& what);

 private:
  struct Group;  // the c10d process group (absent for world_size 1)
  enum class Reduce { kSum, kMin, kMax };
  Communicator(int rank, int world_size, torch::Device collective_device,
               std::unique_ptr<Group> group);

  // Sums `tensors` (all of `dtype`) over the ranks in buckets, then scales them by `scale`.
  absl::Status AllReduceBuckets(const std::vector<torch::Tensor>& tensors, double scale);
  // All-reduces one tensor on the collective device, in place.
  absl::Status AllReduce(torch::Tensor& tensor, Reduce op, const char* what);

  int rank_;
  int world_size_;
  torch::Device collective_device_;  // where tensors handed to the process group live
  std::unique_ptr<Group> group_;
};

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_COMMUNICATOR_H_
