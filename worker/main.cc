// xmod-worker: one per machine. Parses flags into WorkerOptions and calls RunWorker
// (worker/run_worker.h). See docs/design.md, "Processes and binaries".
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "common/credentials.h"
#include "glog/logging.h"
#include "worker/run_worker.h"

namespace {

// Flags whose values are checked before they go into WorkerOptions.
struct RawFlags {
  std::string token_flag;
  std::string token_file;
  std::vector<std::string> train_env;
};

// How to reach the coordinator and who this worker is.
void AddConnectionFlags(CLI::App& app, xmod::WorkerOptions& options, RawFlags& raw) {
  app.add_option("--coordinator", options.coordinator, "host:port of the coordinator's gRPC API");
  app.add_option("--token", raw.token_flag,
                 "removed: a token on the command line is visible in ps; use --token_file");
  app.add_option("--token_file", raw.token_file,
                 "file holding this worker's bearer token (a \"worker NAME SECRET\" credential "
                 "of the coordinator, NAME = --name); empty: the environment variable "
                 "XMOD_TOKEN, else none");
  app.add_flag("--tls", options.tls.enabled,
               "talk TLS to the coordinator, verified with the system's root CAs");
  app.add_option("--tls_ca", options.tls.ca_file,
                 "PEM CA to verify the coordinator with (implies --tls)");
  app.add_option("--tls_cert", options.tls.cert_file, "PEM client certificate for mutual TLS");
  app.add_option("--tls_key", options.tls.key_file, "PEM key of --tls_cert");
  app.add_option("--name", options.name, "worker name, stable per machine (empty: the hostname)");
}

// The slots, folders, timeouts and gang settings.
void AddRunFlags(CLI::App& app, xmod::WorkerOptions& options, RawFlags& raw) {
  app.add_option("--work_dir", options.work_dir, "folder for per-attempt specs and trainer logs");
  app.add_option("--train_bin", options.train_bin,
                 "xmod-train executable (empty: next to xmod-worker)");
  app.add_option("--cpu_slots", options.cpu_slots, "CPU slots offered when there is no GPU");
  app.add_option("--cores_per_slot", options.cores_per_slot,
                 "threads per slot (0: all cores divided by the slots)");
  app.add_flag("--gpus,!--nogpus", options.use_gpus,
               "offer CUDA GPUs found by nvidia-smi (--gpus=false: CPU slots only)");
  app.add_option("--nvml_library", options.nvml_library,
                 "NVML, loaded at run time for GPU telemetry on /metrics and each run's peak GPU "
                 "memory; when it cannot be loaded (no NVIDIA driver) there is none");
  app.add_option("--gpu_sample_ms", options.gpu_sample_ms,
                 "how often GPU telemetry is sampled (0: never)");
  app.add_option("--metric_memory_points", options.metric_memory_points,
                 "unacknowledged metric points held in memory per attempt before the rest is "
                 "spilled to <work_dir>/spill")
      ->check(CLI::PositiveNumber);
  app.add_option("--metric_overflow_points", options.metric_overflow_points,
                 "when a spill file cannot be written (a full disk), points held in memory "
                 "beyond --metric_memory_points before the attempt is stopped (FAILED, retried)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--metrics_listen", options.metrics_listen,
                 "host:port for the Prometheus /metrics endpoint (port 0: any free port; empty: "
                 "none)");
  xmod::AddMetricsAccessFlags(app, &options.metrics_access);
  app.add_option("--ports_file", options.ports_file,
                 "write {\"metrics\":PORT} here once listening");
  app.add_option("--acquire_wait_ms", options.acquire_wait_ms, "AcquireRun long-poll bound (ms)");
  app.add_option("--kill_grace_ms", options.kill_grace_ms,
                 "SIGTERM to SIGKILL grace period for a child (ms)");
  app.add_option("--train_env", raw.train_env,
                 "KEY=VALUE,... added to every xmod-train's environment (after the thread "
                 "budget, so they win; repeatable), e.g. OMP_WAIT_POLICY=ACTIVE "
                 "(docs/design.md, \"Threads on CPU\")")
      ->delimiter(',');
  app.add_option("--drain_timeout_ms", options.drain_timeout_ms,
                 "on SIGTERM, once the trainers stopped, deliver their reports for at most this "
                 "long (ms); the rest is kept in <work_dir>/spill for the next start");
  app.add_option("--stall_timeout_ms", options.stall_timeout_ms,
                 "a child with no step progress for this long (ms) is killed and its attempt "
                 "retried (0: never)");
  app.add_option("--advertise_host", options.advertise_host,
                 "address the other workers of a gang reach this one's trainers at (the "
                 "TCPStore of a gang's rank 0, Gloo); empty: the address the coordinator sees "
                 "this worker connect from");
  app.add_option("--rendezvous_ports", options.rendezvous_ports,
                 "FIRST-LAST: ports the coordinator may give the TCPStore of a gang whose rank "
                 "0 runs here (empty: this worker never hosts a gang's rank 0)");
}

// The token and the trainers' environment into `options`; the exit code when one is wrong
// (logged).
std::optional<int> TakeRawFlags(const RawFlags& raw, xmod::WorkerOptions& options) {
  if (!raw.token_flag.empty()) {
    LOG(ERROR) << "xmod-worker: --token is no longer accepted (a token on the command line is "
                  "visible in ps): use --token_file or XMOD_TOKEN";
    return 2;
  }
  absl::StatusOr<std::string> token = xmod::ReadToken(raw.token_file, "XMOD_TOKEN");
  if (!token.ok()) {
    LOG(ERROR) << "xmod-worker: --token_file: " << token.status();
    return 2;
  }
  options.token = *token;
  for (const std::string& entry : raw.train_env) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) {
      LOG(ERROR) << "xmod-worker: --train_env: \"" << entry << "\" is not KEY=VALUE";
      return 2;
    }
    options.train_env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  xmod::WorkerOptions options;
  RawFlags raw;
  CLI::App app{
      "xmod-worker: runs the coordinator's runs on this machine's GPUs (or CPU slots) as "
      "xmod-train children. Example: xmod-worker --coordinator HOST:PORT --work_dir DIR"};
  xmod::AddVersionFlag(app, "xmod-worker");
  app.option_defaults()->always_capture_default();
  AddConnectionFlags(app, options, raw);
  AddRunFlags(app, options, raw);
  if (std::optional<int> exit = xmod::ParseCommandLine(app, argc, argv)) return *exit;
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (std::optional<int> exit = TakeRawFlags(raw, options)) return *exit;

  absl::Status status = xmod::RunWorker(options);
  if (!status.ok()) {
    LOG(ERROR) << "xmod-worker: " << status;
    return 1;
  }
  return 0;
}
