// xmod-coordinator: parses flags into CoordinatorOptions and runs the coordinator until
// SIGTERM or SIGINT (then shuts down gracefully, draining the database writer).
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "coordinator/coordinator.h"
#include "glog/logging.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7070",
          "gRPC address host:port for users (xmodctl) and workers; port 0 picks a free port");
ABSL_FLAG(std::string, db, "xmod.db", "SQLite database file (WAL mode); created if missing");
ABSL_FLAG(std::string, checkpoint_root, "checkpoints",
          "directory, shared with every worker, under which each run gets "
          "sweep-<S>/run-<R>/ for its checkpoints");
ABSL_FLAG(std::string, token, "",
          "bearer token every RPC (and /api/ request) must carry; empty = no authentication");
ABSL_FLAG(std::string, http_listen, "127.0.0.1:0",
          "host:port of the web dashboard and its JSON API (/api/...); port 0 picks a free "
          "port; empty disables");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:0",
          "host:port of the Prometheus /metrics endpoint; port 0 picks a free port; empty "
          "disables");
ABSL_FLAG(std::string, dashboard_dir, XMOD_DEFAULT_DASHBOARD_DIR,
          "directory of the dashboard's static files, served at /");
ABSL_FLAG(int64_t, lease_ttl_ms, 30000,
          "an attempt whose worker has not heartbeated for this long is lost and its run "
          "requeued");
ABSL_FLAG(int64_t, heartbeat_interval_ms, 2000, "heartbeat period told to workers");
ABSL_FLAG(std::string, ports_file, "",
          "once listening, write {\"grpc\":P,\"http\":P,\"metrics\":P} to this file (0 = "
          "disabled listener)");
ABSL_FLAG(bool, check_data_paths, true,
          "refuse sweeps whose data globs match no file on this machine");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "xmod-coordinator: the xmod service. Stores sweeps, runs and metrics in SQLite, leases "
      "runs to xmod-worker processes, serves the Coordinator API (xmodctl), the WorkerGateway "
      "API, a web dashboard and Prometheus metrics.\n"
      "Example: xmod-coordinator --listen=0.0.0.0:7070 --db=/var/lib/xmod/xmod.db "
      "--checkpoint_root=/shared/xmod/checkpoints --http_listen=0.0.0.0:8080 "
      "--metrics_listen=0.0.0.0:9464");
  absl::FlagsUsageConfig usage;
  // --help lists this file's flags (absl's default looks for <program>.cc).
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "coordinator/main.cc");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;

  xmod::CoordinatorOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.db_path = absl::GetFlag(FLAGS_db);
  options.checkpoint_root = absl::GetFlag(FLAGS_checkpoint_root);
  options.token = absl::GetFlag(FLAGS_token);
  options.http_listen = absl::GetFlag(FLAGS_http_listen);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.dashboard_dir = absl::GetFlag(FLAGS_dashboard_dir);
  options.lease_ttl_ms = absl::GetFlag(FLAGS_lease_ttl_ms);
  options.heartbeat_interval_ms = absl::GetFlag(FLAGS_heartbeat_interval_ms);
  options.ports_file = absl::GetFlag(FLAGS_ports_file);
  options.check_data_paths = absl::GetFlag(FLAGS_check_data_paths);
  if (options.lease_ttl_ms <= options.heartbeat_interval_ms) {
    std::cerr << "--lease_ttl_ms must exceed --heartbeat_interval_ms\n";
    return 2;
  }
  absl::Status status = xmod::RunCoordinator(options);
  if (!status.ok()) {
    LOG(ERROR) << status;
    return 1;
  }
  return 0;
}
