// The C heap of a training process: freed memory stays in the process for the next step.
//
// A training step allocates and frees the same large host buffers step after step
// (activations, gradients, the optimizer's temporaries on the CPU). With glibc's defaults a
// block above the dynamic mmap threshold is mapped and unmapped at every allocation and the
// heap's top is trimmed back to the system, so each step page-faults its memory in again.
// Measured with bench_model on the CPU (cpu-d256, L = 1024, one thread, muon): 95,000 more
// minor page faults over 5 steps and a 3% slower step than with the heap kept
// (docs/gpu-training.md, "The heap"). Call once at process start, before any tensor work.
// Not thread-safe.
#ifndef XMOD_MODEL_TRAIN_HEAP_H_
#define XMOD_MODEL_TRAIN_HEAP_H_

namespace xmod {

// Blocks below 1 GiB (or the most the C library accepts) come from the heap, and the heap is
// trimmed only above 1 GiB free at its top (glibc mallopt M_MMAP_THRESHOLD /
// M_TRIM_THRESHOLD): a process may so hold up to 1 GiB more than it uses after a peak.
// Environment settings (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) take precedence. A
// no-op elsewhere than glibc.
void KeepFreedMemoryInProcess();

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_HEAP_H_
