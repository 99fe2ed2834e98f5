// The training step as CUDA graphs (TrainingSpec.cuda_graphs; docs/gpu-training.md, "The
// step as one graph"): whether a run records its step, and the recordings.
//
// A step runs in phases (train_step.h: the forward/backward pass, then the update). With
// graphs, each phase runs eagerly for TrainStep::kWarmupSteps steps on the stream the
// recording uses, so that lazy set-up — cuBLAS workspaces, allocator blocks — happens there
// and not inside the recording; then it is recorded once, without running, and replayed at
// that step and every later one. A replay issues one launch for the thousands of kernels the
// host would otherwise dispatch one by one. The phases' recordings share one private memory
// pool (they always replay in the order they were recorded), so every tensor a phase
// creates keeps its address from replay to replay; whatever the host hands a phase must
// therefore lie in a buffer the recording reads (TrainStep's static buffers), and nothing a
// phase does may wait for the host or depend on the data's values for a shape.
//
// StepGraphs is an interface so that tests on machines without a GPU stand in recordings
// that re-run the phase (train_step_test.cc). Not thread-safe; one per TrainStep.
#ifndef XMOD_MODEL_TRAIN_STEP_GRAPH_H_
#define XMOD_MODEL_TRAIN_STEP_GRAPH_H_

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace xmod {

class StepGraphs {
 public:
  virtual ~StepGraphs() = default;
  // Runs `phase` now on the recording stream (a warm-up step) and waits for the device.
  virtual void Run(const std::function<void()>& phase) = 0;
  // Records `phase` as recording `index` (0, 1, ... in the order of the calls) without
  // running it.
  virtual void Capture(int index, const std::function<void()>& phase) = 0;
  // Runs what recording `index` holds, on the current stream.
  virtual void Replay(int index) = 0;
};

// Whether this build records graphs on `device`: CUDA devices in the CUDA build
// (-DXMOD_CUDA=ON, LibTorch's CUDAGraph); never the CPU.
bool DeviceHasGraphs(torch::Device device);

// Recordings on `device` (at::cuda::CUDAGraph), on a stream of their own. FAILED_PRECONDITION when
// DeviceHasGraphs is false.
absl::StatusOr<std::unique_ptr<StepGraphs>> MakeDeviceStepGraphs(torch::Device device);

// What "auto" means: off, until graphs are measured against the eager step on a GPU
// (scripts/gpu-check.sh reports both).
inline constexpr bool kStepGraphsByDefault = false;

// Where a run's step could be recorded.
struct StepGraphConditions {
  bool device_has_graphs = false;  // DeviceHasGraphs, or a test's stand-in
  int world_size = 1;              // data-parallel ranks: their all-reduce stays eager
  bool static_step = false;        // TransformerImpl::StaticTrainingStep()
};

// training.cuda_graphs ("auto", "on" or "off") under `conditions`: whether to record the
// step. "on" where a condition fails is INVALID_ARGUMENT naming training.cuda_graphs and the
// condition; "auto" is kStepGraphsByDefault where all hold. Pure.
absl::StatusOr<bool> UseStepGraphs(const std::string& setting,
                                   const StepGraphConditions& conditions);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_STEP_GRAPH_H_
