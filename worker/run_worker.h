// RunWorker: the whole xmod-worker daemon behind main.cc's flags — device probe, gRPC channel
// to the coordinator, Prometheus endpoint (common/metrics_endpoint.h), the Agent, and signal
// handling (the first SIGTERM or SIGINT drains: running attempts are preempted and reported,
// within a bound; a second one stops waiting for reports still undelivered, which are kept
// for the next start).
//
// Thread-safety: call once per process, from the main thread, before any other thread starts
// (it blocks SIGTERM/SIGINT for every thread it creates).
#ifndef XMOD_WORKER_RUN_WORKER_H_
#define XMOD_WORKER_RUN_WORKER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/metrics_endpoint.h"
#include "common/transport.h"
#include "worker/gpu_telemetry.h"

namespace xmod {

struct WorkerOptions {
  std::string coordinator = "127.0.0.1:7070";  // host:port of the WorkerGateway
  std::string token;                           // bearer token ("" = none)
  ClientTlsFiles tls;                          // TLS to the coordinator (off = plaintext)
  std::string name;                            // worker name ("" = hostname)
  std::string work_dir = "xmod-work";          // per-attempt folders
  std::string train_bin;                       // xmod-train ("" = next to this binary)
  int cpu_slots = 1;
  int cores_per_slot = 0;  // 0 = cores / cpu_slots
  bool use_gpus = true;    // probe nvidia-smi
  // NVML for GPU telemetry (loaded at run time; none found: no telemetry) and how often it is
  // sampled (worker/gpu_monitor.h).
  std::string nvml_library = GpuTelemetry::kDefaultLibrary;
  int64_t gpu_sample_ms = 5'000;
  // The metric relay's in-memory bounds (worker/metric_relay.h): points per attempt before
  // spilling, and beyond that when the spill file cannot be written.
  int64_t metric_memory_points = 50'000;
  int64_t metric_overflow_points = 50'000;
  std::string metrics_listen;  // "host:port" for /metrics ("" = none)
  std::string ports_file;      // writes {"metrics":P} once listening
  // HTTPS and a bearer token for /metrics.
  MetricsAccess metrics_access;
  int64_t acquire_wait_ms = 5'000;
  int64_t kill_grace_ms = 60'000;
  int64_t drain_timeout_ms = 30'000;   // delivering a drain's reports, then kept for later
  int64_t stall_timeout_ms = 900'000;  // no step progress this long: kill, retry (0 = never)
  std::vector<std::pair<std::string, std::string>> train_env;  // added to every trainer's env
  std::string advertise_host;                    // for gangs ("" = as the coordinator sees it)
  std::string rendezvous_ports = "29500-29599";  // FIRST-LAST for a gang's TCPStore ("" = none)
};

// Runs until drained by a signal. OK after a clean drain; an error when the worker could not
// start (bad options, no slots, unusable metrics address).
absl::Status RunWorker(const WorkerOptions& options);

}  // namespace xmod

#endif  // XMOD_WORKER_RUN_WORKER_H_
