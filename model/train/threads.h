// The CPU thread budget of a training process: LibTorch's intra-op threads, which are
// OpenMP's (MKL's and oneDNN's matrix products run on them too), set to one count. Call once
// at process start, before any tensor work. Not thread-safe.
//
// What cannot be set from inside the process: libgomp reads OMP_WAIT_POLICY when it is
// loaded, so it is the environment's (libgomp's default unless set; figures in
// docs/design.md, "Threads on CPU").
#ifndef XMOD_MODEL_TRAIN_THREADS_H_
#define XMOD_MODEL_TRAIN_THREADS_H_

namespace xmod {

// `threads` >= 1. Also exports OMP_NUM_THREADS / MKL_NUM_THREADS for libraries that read
// them later.
void ApplyThreadBudget(int threads);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_THREADS_H_
