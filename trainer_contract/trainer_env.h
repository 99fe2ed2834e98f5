// The environment of a trainer process (docs/worker-trainer-contract.md, "Environment"): the
// variables xmod-worker sets on top of its own environment when it starts xmod-train, and those
// the trainer exports for libraries that read them later. LibTorch-free, header-only.
#ifndef XMOD_TRAINER_CONTRACT_TRAINER_ENV_H_
#define XMOD_TRAINER_CONTRACT_TRAINER_ENV_H_

namespace xmod {

// Set by the worker on a CUDA slot to the slot's GPU ordinal: the trainer sees that GPU as
// device 0 (its --device is always cuda:0).
inline constexpr char kEnvCudaVisibleDevices[] = "CUDA_VISIBLE_DEVICES";

// The rank's thread budget T (the --threads value), set by the worker and exported again by
// the trainer (model/train/threads.h).
inline constexpr char kEnvOmpNumThreads[] = "OMP_NUM_THREADS";
inline constexpr char kEnvMklNumThreads[] = "MKL_NUM_THREADS";

}  // namespace xmod

#endif  // XMOD_TRAINER_CONTRACT_TRAINER_ENV_H_
