// Checkpoints: everything a run needs to continue bit-exactly — model parameters and
// buffers, both optimizers' state (Muon momentum, AdamW moments and step count), the step,
// token and FLOP counters, the data position and the torch CPU generator state. The data
// order is a pure function of (seed, position), so the position is the loader's whole RNG
// state; the learning rate is recomputed from the schedule.
//
// Files are `ckpt-<step, 10 digits>.pt` (a torch::serialize archive) written atomically
// (temp file + fsync + rename), followed by a sidecar `<file>.sha256` ("<hex>  <name>",
// sha256sum's format) also written atomically. Loading verifies the sidecar when present.
// Thread-compatible free functions.
#ifndef XMOD_MODEL_TRAIN_CHECKPOINT_H_
#define XMOD_MODEL_TRAIN_CHECKPOINT_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/train/adamw.h"
#include "model/train/data_loader.h"
#include "model/train/muon.h"

namespace xmod {

// Counters of a run after `step` optimizer steps.
struct TrainState {
  int64_t step = 0;
  int64_t tokens = 0;  // training tokens consumed
  double flops = 0;    // cumulative training FLOPs
  DataPosition data;   // where the next batch starts
};

struct CheckpointInfo {
  std::string path;
  std::string sha256;  // lower-case hex of the file's bytes
  int64_t bytes = 0;
};

// `dir`/ckpt-<step>.pt.
std::string CheckpointPath(const std::string& dir, int64_t step);

// Writes the checkpoint and its sidecar. INTERNAL (with the path) on I/O failure.
absl::StatusOr<CheckpointInfo> SaveCheckpoint(const std::string& path, torch::nn::Module& model,
                                              const Muon& muon, const AdamW& adamw,
                                              const TrainState& state);

// Restores into objects built from the same spec (the torch CPU generator included).
// NOT_FOUND if missing; DATA_LOSS if the sidecar's checksum differs or the archive does not
// parse; FAILED_PRECONDITION if a tensor is missing or shaped unlike the model's.
absl::Status LoadCheckpoint(const std::string& path, torch::nn::Module* model, Muon* muon,
                            AdamW* adamw, TrainState* state);

// Deletes, with their sidecars, the checkpoints in `dir` past `current_step` (left by an
// attempt whose later steps were superseded by a resume) and all but the `keep` highest at
// or below it.
absl::Status PruneCheckpoints(const std::string& dir, int64_t current_step, int keep);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_CHECKPOINT_H_
