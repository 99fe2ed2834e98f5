// Checkpoints: everything a run needs to continue bit-exactly — model parameters and
// buffers, both optimizers' state (Muon momentum, AdamW moments and step count), the step,
// token and FLOP counters, the data position and the torch CPU generator state — and the
// run's RunSpec, for evaluating the file on its own (xmod-eval). The data order is a pure function
// of (seed, position), so the position is the loader's whole RNG state; the learning rate is
// recomputed from the schedule.
//
// Files belong to the attempt that wrote them: `ckpt-a<attempt>-s<step, 10 digits>.pt` (a
// torch::serialize archive), so a fenced-off attempt can never overwrite or delete another
// attempt's files. Each is written atomically (temp file + fsync + rename + folder fsync),
// followed by a sidecar `<file>.sha256` ("<hex>  <name>", sha256sum's format) also written
// atomically. The trainer deletes nothing: the worker removes checkpoints once newer ones
// are durable in the coordinator's database. Before a resume, VerifyCheckpointFile checks
// the digest the coordinator recorded, sidecar or not; loading checks the sidecar when
// present. Thread-compatible free functions.
#ifndef XMOD_MODEL_TRAIN_CHECKPOINT_H_
#define XMOD_MODEL_TRAIN_CHECKPOINT_H_

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/train/adamw.h"
#include "model/train/data_loader.h"
#include "model/train/muon.h"
#include "xmod/v1/spec.pb.h"

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

// `dir`/ckpt-a<attempt>-s<step>.pt.
std::string CheckpointPath(const std::string& dir, int attempt, int64_t step);

// Writes the checkpoint and its sidecar; with `spec`, the run's RunSpec too (as its binary
// serialization, key `spec/run`), so that the file alone rebuilds the model (xmod-eval).
// INTERNAL (with the path) on I/O failure.
absl::StatusOr<CheckpointInfo> SaveCheckpoint(const std::string& path, torch::nn::Module& model,
                                              const Muon& muon, const AdamW& adamw,
                                              const TrainState& state,
                                              const xmod::v1::RunSpec* spec = nullptr);

// Restores into objects built from the same spec (the torch CPU generator included).
// NOT_FOUND if missing; DATA_LOSS if the sidecar's checksum differs, the archive does not
// parse or a counter or the generator state is malformed; FAILED_PRECONDITION if a tensor
// is missing or shaped unlike the model's. Never throws.
absl::Status LoadCheckpoint(const std::string& path, torch::nn::Module* model, Muon* muon,
                            AdamW* adamw, TrainState* state);

// For evaluation: the RunSpec stored in the checkpoint at `path` (sidecar checked as by
// LoadCheckpoint), and the model tensors loaded into `model` (built from that spec; the
// optimizers' state and the counters are ignored). NOT_FOUND / DATA_LOSS as LoadCheckpoint;
// FAILED_PRECONDITION when the file holds no spec (written before specs were stored) or a
// model tensor is missing or shaped unlike the model's. Never throws.
absl::StatusOr<xmod::v1::RunSpec> ReadCheckpointSpec(const std::string& path);
absl::Status LoadModelWeights(const std::string& path, torch::nn::Module* model);

// Checks, without loading it, that the file at `path` hashes to `expected_sha256` (lower-case
// hex; the digest the coordinator recorded), or, when that is empty, to its sidecar's digest.
// It reads a regular file only, never more than its size, and with `expected_bytes` > 0 (the
// size the coordinator recorded) nothing of a file of another size.
// OK; NOT_FOUND if the file is missing; DATA_LOSS naming both digests on a mismatch, or both
// sizes; FAILED_PRECONDITION when it is not a regular file or there is nothing to check
// against (no digest and no sidecar).
absl::Status VerifyCheckpointFile(const std::string& path, const std::string& expected_sha256,
                                  int64_t expected_bytes = 0);

// A checkpoint offered for resuming, with the digest it must have.
struct ResumeCandidate {
  std::string path;
  std::string sha256;  // empty: checked against the sidecar
  int64_t bytes = 0;   // its recorded size; 0: unknown
};
struct ResumeRejection {
  ResumeCandidate candidate;
  absl::Status reason;
};
struct ResumeChoice {
  std::optional<ResumeCandidate> chosen;  // the first candidate that verified; none if all failed
  std::vector<ResumeRejection> rejected;  // those before it that did not, in order
};
// Verifies `candidates` (newest first) in order with VerifyCheckpointFile and stops at the
// first that passes.
ResumeChoice ChooseResume(const std::vector<ResumeCandidate>& candidates);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_CHECKPOINT_H_
