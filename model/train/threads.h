// The CPU thread budget of a training process. LibTorch's intra-op threads on top of
// OpenBLAS's own pthreads oversubscribe the cores (a matmul loop ran 2.8x slower with 2 + 2
// threads on 2 cores, docs/design.md), so one budget is applied to all of them: torch
// intra-op threads, OpenMP, and OpenBLAS (through openblas_set_num_threads when the loaded
// BLAS is OpenBLAS). Call once at process start, before any tensor work. Not thread-safe.
//
// What cannot be set from inside the process: libgomp reads OMP_WAIT_POLICY when it is
// loaded. With its default, idle OpenMP threads spin after each parallel region and take
// cores from OpenBLAS's pthreads; the worker therefore starts xmod-train with
// OMP_WAIT_POLICY=PASSIVE (figures in docs/design.md, "Threads on CPU").
#ifndef XMOD_MODEL_TRAIN_THREADS_H_
#define XMOD_MODEL_TRAIN_THREADS_H_

namespace xmod {

// `threads` >= 1. Also exports OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / MKL_NUM_THREADS for
// libraries that read them later. Returns whether OpenBLAS was found and set.
bool ApplyThreadBudget(int threads);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_THREADS_H_
