// OverlappedGradientReducer: the data-parallel gradient average of a step, all-reduced in
// buckets while backward is still running (TrainingSpec.overlap_grad_reduce), the way
// PyTorch's DistributedDataParallel overlaps communication with computation.
//
// Parameters are packed, in reverse order (backward produces the last layers' gradients
// first), into buckets of at most `bucket_bytes`, one flat buffer each. A hook on every
// parameter sees its gradient of the step's last micro-batch as soon as autograd has
// computed it, copies "earlier micro-batches' .grad + this gradient" into the bucket, and
// when a bucket is complete its asynchronous all-reduce starts. Buckets always start in
// bucket order (a complete bucket waits for the earlier ones), so every rank issues the
// collectives in the same order whatever order its hooks run in. Finish() starts what is
// left (parameters that got no gradient count as zero), waits, and writes the averaged
// gradients back to .grad.
//
// Needs every parameter to get a gradient on every step on every rank for the result to
// equal Communicator::AverageGradients (which keeps "no gradient anywhere" as no gradient):
// the trainer uses it for models without MoE layers. Thread-safe hooks (autograd may run
// them on its device threads); the other methods are called by the training thread.
#ifndef XMOD_MODEL_TRAIN_GRAD_REDUCER_H_
#define XMOD_MODEL_TRAIN_GRAD_REDUCER_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "model/train/communicator.h"

namespace xmod {

class OverlappedGradientReducer {
 public:
  // `comm` must outlive the reducer and have world_size > 1; `parameters` live on the
  // communicator's collective device.
  OverlappedGradientReducer(Communicator* comm, std::vector<torch::Tensor> parameters,
                            int64_t bucket_bytes = int64_t{25} << 20);
  ~OverlappedGradientReducer();
  OverlappedGradientReducer(const OverlappedGradientReducer&) = delete;
  OverlappedGradientReducer& operator=(const OverlappedGradientReducer&) = delete;

  // Call before the backward pass of the step's last micro-batch.
  void Arm();
  // After that backward: replaces each parameter's gradient by the mean over the ranks.
  // UNAVAILABLE if a collective fails.
  absl::Status Finish();

 private:
  struct Slot {
    int bucket = 0;
    int64_t offset = 0;  // in elements, inside the bucket's buffer
  };
  struct Bucket {
    torch::Tensor buffer;                  // (elements) flat gradients of its parameters
    std::vector<size_t> parameters;        // indices into parameters_
    size_t pending = 0;                    // parameters whose gradient has not arrived
    std::vector<bool> arrived;             // per entry of `parameters`
    std::shared_ptr<CollectiveWork> work;  // the running all-reduce, once started
  };

  void OnGradient(size_t index, const torch::Tensor& grad);
  // Starts every complete bucket from next_bucket_ on, in order. Caller holds mu_.
  void LaunchReady();
  void Launch(Bucket& bucket);

  Communicator* comm_;
  std::vector<torch::Tensor> parameters_;
  std::vector<Slot> slots_;             // per parameter
  std::vector<unsigned> hook_handles_;  // per parameter
  std::vector<Bucket> buckets_;
  std::mutex mu_;
  bool armed_ = false;
  size_t next_bucket_ = 0;
  absl::Status launch_status_;
};

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_GRAD_REDUCER_H_
