// Exit codes of xmod-train: the part of the worker <-> trainer contract between the trainer
// (which exits with them) and the worker and coordinator (which read them from
// FinishRunRequest.exit_code to decide whether an attempt is worth retrying). LibTorch-free and
// header-only, so that the worker and the coordinator include it without linking the model.
//
//   code  name              retry policy     meaning
//   0     kExitOk           —                the FLOP budget is spent
//   1     kExitFailure      retry            anything else (I/O, rendezvous, a crash reported)
//   2     kExitBadFlags     retry            the command line could not be parsed (this
//                                          worker's binary may not match; another may)
//   3     kExitInvalidConfig never           the run spec or options are invalid
//   4     kExitDiverged     never            the loss became NaN / infinite
//   5     kExitOutOfMemory  less memory      host or device memory ran out: requeued with the
//                                          next memory plan (activation checkpointing, then
//                                          halved micro-batches); FAILED past the last
//   6     kExitDataLoss     retry            a checkpoint or data shard failed verification
//   7     kExitLeaseExpired requeue          stopped because the attempt's lease lapsed
//   75    kExitPreempted    requeue          stopped by SIGTERM after a checkpoint (EX_TEMPFAIL)
//
// A signal shows as 128 + signo (the worker's ExitStatus::AsExitCode) and is retried.
#ifndef XMOD_TRAINER_CONTRACT_EXIT_CODES_H_
#define XMOD_TRAINER_CONTRACT_EXIT_CODES_H_

namespace xmod {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadFlags = 2;
inline constexpr int kExitInvalidConfig = 3;
inline constexpr int kExitDiverged = 4;
inline constexpr int kExitOutOfMemory = 5;
inline constexpr int kExitDataLoss = 6;
inline constexpr int kExitLeaseExpired = 7;
inline constexpr int kExitPreempted = 75;

// What the coordinator does with a failed attempt that exited with a code.
enum class ExitRetry {
  kRetry,       // requeue with backoff, counting one failure
  kLessMemory,  // requeue with the next memory plan; FAIL when there is none
  kNever,       // fail the run at once: a retry would fail the same way
  kRequeue,     // requeue at once without counting a failure
};

constexpr ExitRetry RetryPolicyOf(int exit_code) {
  switch (exit_code) {
    case kExitInvalidConfig:
    case kExitDiverged:
      return ExitRetry::kNever;
    case kExitOutOfMemory:
      return ExitRetry::kLessMemory;
    case kExitLeaseExpired:
    case kExitPreempted:
      return ExitRetry::kRequeue;
    default:
      return ExitRetry::kRetry;
  }
}

// A short reason for the exit code, for errors and events ("" for the generic ones).
constexpr const char* ExitReason(int exit_code) {
  switch (exit_code) {
    case kExitBadFlags:
      return "bad command line";
    case kExitInvalidConfig:
      return "invalid configuration";
    case kExitDiverged:
      return "loss diverged";
    case kExitOutOfMemory:
      return "out of memory";
    case kExitDataLoss:
      return "data loss";
    case kExitLeaseExpired:
      return "lease expired";
    case kExitPreempted:
      return "preempted";
    default:
      return "";
  }
}

}  // namespace xmod

#endif  // XMOD_TRAINER_CONTRACT_EXIT_CODES_H_
