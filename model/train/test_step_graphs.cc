// Stand-in step graphs for tests: see test_step_graphs.h.
#include "model/train/test_step_graphs.h"

#include <stdexcept>

namespace xmod {

ClosureStepGraphs::ClosureStepGraphs(ReplayCounts* counts)
    : counts_(counts != nullptr ? counts : &own_) {}

void ClosureStepGraphs::Run(const std::function<void()>& phase) {
  ++counts_->runs;
  phase();
}

void ClosureStepGraphs::Capture(int index, const std::function<void()>& phase) {
  if (index != static_cast<int>(recorded_.size())) throw std::logic_error("capture out of order");
  ++counts_->captures;
  recorded_.push_back(phase);
}

void ClosureStepGraphs::Replay(int index) {
  ++counts_->replays;
  recorded_.at(index)();
}

std::function<std::unique_ptr<StepGraphs>()> ClosureStepGraphsFactory(ReplayCounts* counts) {
  return [counts] { return std::make_unique<ClosureStepGraphs>(counts); };
}

}  // namespace xmod
