// Options of a data-parallel run: which rank this process is, how many ranks there are, where
// they meet (the c10d store) and which collective backend they use. LibTorch-free, so that
// xmod-train's main and the trainer's header stay cheap to compile. Pure functions,
// thread-safe.
//
// Rendezvous: a path = a c10d::FileStore file on storage every rank sees (one machine, or a
// shared filesystem); it must be fresh for each job (a file left by an earlier job holds its
// keys). `tcp://HOST:PORT` = a c10d::TCPStore served by rank 0 on HOST:PORT.
#ifndef XMOD_MODEL_TRAIN_DISTRIBUTED_OPTIONS_H_
#define XMOD_MODEL_TRAIN_DISTRIBUTED_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace xmod {

struct DistributedOptions {
  int rank = 0;                  // 0 .. world_size - 1; rank 0 writes events and checkpoints
  int world_size = 1;            // 1 = a single process (no store, no collectives)
  std::string rendezvous;        // FileStore path or tcp://HOST:PORT; needed when world_size > 1
  std::string backend = "gloo";  // "gloo" (CPU tensors) or "nccl" (CUDA LibTorch builds only)
  // Address or hostname the Gloo transport of this rank binds to and announces; empty = the
  // machine's hostname if it resolves to a usable address, else loopback.
  std::string host;
  int timeout_s = 300;  // rendezvous and each collective; a lost peer fails the run after this
};

// INVALID_ARGUMENT naming the flag (--rank, --world_size, --rendezvous, --backend,
// --dist_timeout_s) when the options are inconsistent.
absl::Status ValidateDistributedOptions(const DistributedOptions& options);

// Parsed `tcp://HOST:PORT`; `ok` false if `rendezvous` is not of that form.
struct TcpRendezvous {
  bool ok = false;
  std::string host;
  uint16_t port = 0;
};
TcpRendezvous ParseTcpRendezvous(const std::string& rendezvous);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_DISTRIBUTED_OPTIONS_H_
