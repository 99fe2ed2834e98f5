// Trainer: trains one run (a RunSpec) to its training-FLOP budget — the xmod-train side of
// the worker contract (docs/fault-tolerance.md: leases, checkpoints, exit codes).
//
// Steps = floor(flop_budget / (train_flops_per_token x batch_tokens)), training FLOPs from
// model/accounting (3 x forward, paper B.1). Each step draws batch_tokens / seq_len windows,
// runs forward/backward in micro-batches, clips the global gradient norm, and updates matrices
// with Muon and the rest with AdamW (paper Table 5) at rates from the warmup + cosine
// schedule. Evaluation at `eval_marks` evenly spaced FLOP marks, the last one at the end:
// val/loss with the causal threshold rule, and for routed models val/loss_topk and the
// routing diagnostics of B.7 (with Table 10's separate top-k-driven pass and reference
// schemes). After the final evaluation, the zero-shot tasks of training.eval_tasks
// (model/eval; read at setup, so a bad file fails the run before training) give the metrics
// eval/<task>/acc, acc_norm or ppl, and n, at the final step. Checkpoints at every
// evaluation (and every checkpoint_every_steps), named by attempt and step; the trainer
// deletes none (the worker collects them once newer ones are durable in the coordinator).
// Events go to the EventWriter: `started`, then metric / progress / checkpoint events,
// `finished` last.
//
// The GPU step (TrainingSpec precision / attention / activation_checkpointing /
// overlap_grad_reduce / log_every_steps / cuda_graphs; docs/gpu-training.md): bf16 autocast
// with fp32 master weights, fused attention where the LibTorch has it, batches through pinned
// memory, losses kept on the device and read only at logging and evaluation marks, and the
// step (train_step.h) recorded as CUDA graphs and replayed.
//
// Data parallelism (options.distributed, world_size W > 1): W processes ("ranks") train one
// run with the same global batch as one process would. Each rank reads its own disjoint
// slice of every step's windows (rank r takes windows [r n/W, (r+1) n/W) of the step's n;
// W must divide n, else INVALID_ARGUMENT naming training.batch_tokens), runs
// forward/backward on it, and the gradients are all-reduced and averaged (communicator.h)
// before clipping; Muon and AdamW are deterministic given equal gradients, so the ranks stay
// bit-identical (checked by a parameter checksum all-reduce after setup and at every
// evaluation; a mismatch fails the run). Per-rank counters the model keeps in buffers named
// `load` (MoE expert loads) are summed before the aux-loss-free bias update. train/loss and
// train/aux_loss are the global means; tokens and FLOPs count the global batch. Evaluation
// runs on rank 0 only (the routing diagnostics do not merge across ranks) and its results
// are broadcast. Only rank 0 writes events and checkpoints; the checkpoint holds the global
// data position, so every rank resumes from the same file. A stop request on any rank stops
// all ranks after the same step.
//
// Not thread-safe: one run per process (it sets the torch CPU generator and thread count).
#ifndef XMOD_MODEL_TRAIN_TRAINER_H_
#define XMOD_MODEL_TRAIN_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "model/train/distributed_options.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

class StepGraphs;  // model/train/step_graph.h

struct TrainerOptions {
  xmod::v1::RunSpec spec;
  int events_fd = -1;          // delimited TrainerEvent stream; -1 = none (glog on stderr only)
  std::string resume_path;     // checkpoint to continue from; empty = fresh start
  std::string device = "cpu";  // "cpu" or "cuda:N" (needs a CUDA LibTorch)
  int log_every = 0;           // train/* metrics every N steps; 0 = spec's log_every_steps
  // Tokens per forward/backward; 0 = the spec's training.micro_batch_tokens (whose 0 is the
  // rank's whole share of the batch).
  int64_t micro_batch_tokens = 0;
  // Polled after every step with the step count; true = write a checkpoint and return with
  // `preempted` set (the SIGTERM path).
  std::function<bool(int64_t step)> stop_requested;
  Clock* clock = Clock::Real();    // throttles progress events (~1/s)
  DistributedOptions distributed;  // rank / world size / rendezvous; default one process
  // Tests only: stands in for the device's graphs (step_graph.h), so that training.cuda_graphs
  // "on" runs its bookkeeping — static buffers, warm-up, one recording, replays — on a CPU.
  std::function<std::unique_ptr<StepGraphs>()> TEST_step_graphs;
};

struct TrainerResult {
  bool preempted = false;  // stopped by stop_requested before the budget was spent
  int64_t steps = 0;       // optimizer steps completed (including those before a resume)
  int64_t tokens = 0;
  double flops = 0;                      // cumulative training FLOPs
  double final_val_loss = 0;             // 0 if never evaluated
  double seconds = 0;                    // wall time of this call
  double tokens_per_second = 0;          // training tokens / training seconds (no eval, no ckpt)
  double achieved_flops_per_second = 0;  // counted training FLOPs / training seconds
  std::string last_checkpoint;           // empty if none written (always on ranks > 0)
  // Data-parallel runs only: SHA-256 (hex) of the final parameters' bytes, equal on all ranks.
  std::string parameters_sha256;
};

// Trains. Errors: INVALID_ARGUMENT for a bad spec (field named), NOT_FOUND / DATA_LOSS /
// FAILED_PRECONDITION for missing or corrupt data and checkpoints, INTERNAL for a LibTorch
// failure or a non-finite loss (with its message).
absl::StatusOr<TrainerResult> RunTrainer(const TrainerOptions& options);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_TRAINER_H_
