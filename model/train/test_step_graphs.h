// A stand-in for the device's step graphs in tests on machines without a GPU: Capture keeps
// the phase without running it and Replay runs what it kept, as a CUDA graph replays its
// kernels; warm-up runs run at once. Counts what it was asked to do. Not thread-safe.
#ifndef XMOD_MODEL_TRAIN_TEST_STEP_GRAPHS_H_
#define XMOD_MODEL_TRAIN_TEST_STEP_GRAPHS_H_

#include <functional>
#include <memory>
#include <vector>

#include "model/train/step_graph.h"

namespace xmod {

struct ReplayCounts {
  int runs = 0;      // warm-up phases run
  int captures = 0;  // phases recorded
  int replays = 0;   // recordings replayed
};

class ClosureStepGraphs : public StepGraphs {
 public:
  // `counts` (may be null) outlives the graphs.
  explicit ClosureStepGraphs(ReplayCounts* counts = nullptr);

  void Run(const std::function<void()>& phase) override;
  void Capture(int index, const std::function<void()>& phase) override;
  void Replay(int index) override;

 private:
  ReplayCounts own_;
  ReplayCounts* counts_;
  std::vector<std::function<void()>> recorded_;
};

// A TrainerOptions::TEST_step_graphs factory of ClosureStepGraphs counting into `counts`.
std::function<std::unique_ptr<StepGraphs>()> ClosureStepGraphsFactory(ReplayCounts* counts);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_TEST_STEP_GRAPHS_H_
