// See run_worker.h.
#include "worker/run_worker.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/files.h"
#include "glog/logging.h"
#include "prometheus/registry.h"
#include "worker/agent.h"
#include "worker/device_discovery.h"
#include "worker/gateway_client.h"
#include "worker/gpu_monitor.h"
#include "worker/process_supervisor.h"
#include "worker/worker_metrics.h"

namespace xmod {
namespace {

std::string Hostname() {
  char name[HOST_NAME_MAX + 1] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::string DefaultTrainBin() {
  char path[PATH_MAX + 1] = {0};
  ssize_t n = readlink("/proc/self/exe", path, PATH_MAX);
  if (n <= 0) return "xmod-train";
  std::string self(path, n);
  return self.substr(0, self.rfind('/') + 1) + "xmod-train";
}

// The agent's options from the worker's; INVALID_ARGUMENT for a malformed rendezvous_ports.
absl::StatusOr<AgentOptions> AgentOptionsFrom(const WorkerOptions& options) {
  AgentOptions agent_options;
  agent_options.hostname = Hostname();
  agent_options.worker_name = options.name.empty() ? agent_options.hostname : options.name;
  agent_options.work_dir = options.work_dir;
  agent_options.train_bin = options.train_bin.empty() ? DefaultTrainBin() : options.train_bin;
  agent_options.acquire_wait_ms = options.acquire_wait_ms;
  agent_options.kill_grace_ms = options.kill_grace_ms;
  agent_options.drain_timeout_ms = options.drain_timeout_ms;
  agent_options.stall_timeout_ms = options.stall_timeout_ms;
  agent_options.train_env = options.train_env;
  agent_options.advertise_host = options.advertise_host;
  agent_options.relay.max_memory_points = options.metric_memory_points;
  agent_options.relay.max_overflow_points = options.metric_overflow_points;
  if (options.rendezvous_ports.empty()) return agent_options;
  const std::vector<std::string> range = absl::StrSplit(options.rendezvous_ports, '-');
  int32_t first = 0;
  int32_t last = 0;
  if (range.size() != 2 || !absl::SimpleAtoi(range[0], &first) ||
      !absl::SimpleAtoi(range[1], &last) || first < 1 || last < first || last > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous_ports: \"", options.rendezvous_ports,
                                                   "\" is not FIRST-LAST within 1..65535"));
  }
  agent_options.rendezvous_port_first = first;
  agent_options.rendezvous_port_last = last;
  return agent_options;
}

// The /metrics endpoint, with its port in options.ports_file; null without metrics_listen.
absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetricsEndpoint(
    const WorkerOptions& options, std::shared_ptr<prometheus::Registry> registry) {
  if (options.metrics_listen.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> started =
      MetricsEndpoint::Start(options.metrics_listen, options.metrics_access, std::move(registry));
  if (!started.ok()) return started.status();
  const int port = (*started)->port();
  LOG(INFO) << "serving /metrics on port " << port;
  if (!options.ports_file.empty()) {
    absl::Status status =
        WriteFileAtomic(options.ports_file, absl::StrCat("{\"metrics\":", port, "}\n"));
    if (!status.ok()) return status;
  }
  return started;
}

// The signal thread's loop until `done`: the first of `signals` drains the agent, later ones
// abandon the undelivered reports.
void ForwardSignals(const sigset_t& signals, const std::atomic<bool>& done, Agent& agent) {
  int received = 0;
  const timespec poll = {0, 200'000'000};
  while (!done.load()) {
    if (sigtimedwait(&signals, nullptr, &poll) < 0) continue;
    if (++received == 1) {
      LOG(INFO) << "signal received: draining (send again to stop waiting for undelivered "
                   "reports, which are kept for the next start)";
      agent.Drain();
    } else {
      agent.Abandon();
    }
  }
}

// GPU telemetry when the worker offers GPUs and NVML loads; null (logged) otherwise.
std::unique_ptr<GpuMonitor> StartGpuMonitor(const WorkerOptions& options,
                                            prometheus::Registry& registry) {
  if (!options.use_gpus || options.gpu_sample_ms <= 0) return nullptr;
  absl::StatusOr<std::unique_ptr<GpuTelemetry>> telemetry =
      GpuTelemetry::Load(options.nvml_library);
  if (!telemetry.ok()) {
    LOG(INFO) << "no GPU telemetry: " << telemetry.status().message();
    return nullptr;
  }
  LOG(INFO) << "GPU telemetry from " << options.nvml_library << " every " << options.gpu_sample_ms
            << " ms";
  return std::make_unique<GpuMonitor>(*std::move(telemetry), registry,
                                      absl::Milliseconds(options.gpu_sample_ms));
}

}  // namespace

absl::Status RunWorker(const WorkerOptions& options) {
  // Every thread created from here on inherits this mask; the signal thread takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<AgentOptions> agent_options = AgentOptionsFrom(options);
  if (!agent_options.ok()) return agent_options.status();
  if (access(agent_options->train_bin.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("train_bin: not executable: ", agent_options->train_bin));
  }
  if (absl::Status status = MakeDirs(options.work_dir); !status.ok()) return status;

  auto registry = std::make_shared<prometheus::Registry>();
  WorkerMetrics metrics(*registry);
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> metrics_endpoint =
      StartMetricsEndpoint(options, registry);
  if (!metrics_endpoint.ok()) return metrics_endpoint.status();

  SystemProbeOptions probe_options;
  probe_options.cpu_slots = options.cpu_slots;
  probe_options.cores_per_slot = options.cores_per_slot;
  probe_options.use_gpus = options.use_gpus;
  SystemDeviceProbe probe(probe_options);
  std::unique_ptr<ProcessLauncher> launcher = NewPosixLauncher();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      NewChannel(options.coordinator, options.tls);
  if (!channel.ok()) return channel.status();
  std::unique_ptr<GatewayClient> gateway = NewGrpcGatewayClient(*channel, options.token);
  std::unique_ptr<GpuMonitor> gpu_monitor = StartGpuMonitor(options, *registry);
  agent_options->gpu_monitor = gpu_monitor.get();
  Agent agent(*agent_options, gateway.get(), launcher.get(), &probe, Clock::Real(), &metrics);

  std::atomic<bool> done{false};
  std::thread signal_thread([&] { ForwardSignals(signals, done, agent); });
  absl::Status status = agent.Register();
  if (status.ok()) {
    agent.Start();
  } else if (!absl::IsCancelled(status)) {
    agent.Drain();
  }
  agent.Wait();
  done = true;
  signal_thread.join();
  LOG(INFO) << "worker stopped";
  return absl::IsCancelled(status) ? absl::OkStatus() : status;
}

}  // namespace xmod
