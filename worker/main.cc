// xmod-worker: one per machine. Parses flags into WorkerOptions and calls RunWorker
// (worker/run_worker.h). See docs/design.md, "Processes and binaries".
#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "common/build_info.h"
#include "common/credentials.h"
#include "glog/logging.h"
#include "worker/run_worker.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:7070", "host:port of the coordinator's gRPC API");
ABSL_FLAG(std::string, token, "",
          "removed: a token on the command line is visible in ps; use --token_file");
ABSL_FLAG(std::string, token_file, "",
          "file holding this worker's bearer token (a \"worker NAME SECRET\" credential of the "
          "coordinator, NAME = --name); empty: the environment variable XMOD_TOKEN, else none");
ABSL_FLAG(bool, tls, false, "talk TLS to the coordinator, verified with the system's root CAs");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA to verify the coordinator with (implies --tls)");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate for mutual TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM key of --tls_cert");
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
ABSL_FLAG(std::vector<std::string>, train_env, {},
          "KEY=VALUE,... added to every xmod-train's environment (after the thread budget, so "
          "they win), e.g. LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp to give "
          "the trainers OpenBLAS's OpenMP build (docs/design.md, \"Threads on CPU\")");
ABSL_FLAG(int64_t, stall_timeout_ms, 900000,
          "a child with no step progress for this long (ms) is killed and its attempt retried "
          "(0: never)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("xmod-worker --coordinator HOST:PORT [--work_dir DIR] ...");
  absl::FlagsUsageConfig usage;
  usage.version_string = [] { return xmod::VersionLine("xmod-worker") + "\n"; };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;

  xmod::WorkerOptions options;
  options.coordinator = absl::GetFlag(FLAGS_coordinator);
  if (!absl::GetFlag(FLAGS_token).empty()) {
    LOG(ERROR) << "xmod-worker: --token is no longer accepted (a token on the command line is "
                  "visible in ps): use --token_file or XMOD_TOKEN";
    return 2;
  }
  absl::StatusOr<std::string> token =
      xmod::ReadToken(absl::GetFlag(FLAGS_token_file), "XMOD_TOKEN");
  if (!token.ok()) {
    LOG(ERROR) << "xmod-worker: --token_file: " << token.status();
    return 2;
  }
  options.token = *token;
  options.tls.enabled = absl::GetFlag(FLAGS_tls);
  options.tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
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
  options.stall_timeout_ms = absl::GetFlag(FLAGS_stall_timeout_ms);
  for (const std::string& entry : absl::GetFlag(FLAGS_train_env)) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) {
      LOG(ERROR) << "xmod-worker: --train_env: \"" << entry << "\" is not KEY=VALUE";
      return 2;
    }
    options.train_env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }

  absl::Status status = xmod::RunWorker(options);
  if (!status.ok()) {
    LOG(ERROR) << "xmod-worker: " << status;
    return 1;
  }
  return 0;
}
