// xmod-worker: one per machine. Parses flags into WorkerOptions and calls RunWorker
// (worker/run_worker.h). See ARCHITECTURE.md, "Processes and binaries".
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "glog/logging.h"
#include "worker/run_worker.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:50051", "host:port of the coordinator's gRPC API");
ABSL_FLAG(std::string, token, "", "bearer token for the coordinator (empty: none)");
ABSL_FLAG(std::string, name, "", "worker name, stable per machine (empty: the hostname)");
ABSL_FLAG(std::string, work_dir, "xmod-work", "folder for per-attempt specs and trainer logs");
ABSL_FLAG(std::string, train_bin, "", "xmod-train executable (empty: next to xmod-worker)");
ABSL_FLAG(int32_t, cpu_slots, 1, "CPU slots offered when there is no GPU");
ABSL_FLAG(int32_t, cores_per_slot, 0, "threads per slot (0: all cores divided by the slots)");
ABSL_FLAG(bool, gpus, true, "offer CUDA GPUs found by nvidia-smi (false: CPU slots only)");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port for the Prometheus /metrics endpoint (port 0: any free port; empty: none)");
ABSL_FLAG(std::string, ports_file, "", "write {\"metrics\":PORT} here once listening");
ABSL_FLAG(int64_t, acquire_wait_ms, 5000, "AcquireRun long-poll bound (ms)");
ABSL_FLAG(int64_t, kill_grace_ms, 60000, "SIGTERM to SIGKILL grace period for a child (ms)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("xmod-worker --coordinator HOST:PORT [--work_dir DIR] ...");
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;

  xmod::WorkerOptions options;
  options.coordinator = absl::GetFlag(FLAGS_coordinator);
  options.token = absl::GetFlag(FLAGS_token);
  options.name = absl::GetFlag(FLAGS_name);
  options.work_dir = absl::GetFlag(FLAGS_work_dir);
  options.train_bin = absl::GetFlag(FLAGS_train_bin);
  options.cpu_slots = absl::GetFlag(FLAGS_cpu_slots);
  options.cores_per_slot = absl::GetFlag(FLAGS_cores_per_slot);
  options.use_gpus = absl::GetFlag(FLAGS_gpus);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.ports_file = absl::GetFlag(FLAGS_ports_file);
  options.acquire_wait_ms = absl::GetFlag(FLAGS_acquire_wait_ms);
  options.kill_grace_ms = absl::GetFlag(FLAGS_kill_grace_ms);

  absl::Status status = xmod::RunWorker(options);
  if (!status.ok()) {
    LOG(ERROR) << "xmod-worker: " << status;
    return 1;
  }
  return 0;
}
