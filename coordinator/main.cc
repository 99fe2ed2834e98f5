// xmod-coordinator: parses flags into CoordinatorOptions and runs the coordinator until
// SIGTERM or SIGINT (then shuts down gracefully, draining the database writer).
#include <sys/stat.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "common/build_info.h"
#include "coordinator/coordinator.h"
#include "glog/logging.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7070",
          "gRPC address host:port for users (xmodctl) and workers; port 0 picks a free port");
ABSL_FLAG(std::string, db, "xmod.db", "SQLite database file (WAL mode); created if missing");
ABSL_FLAG(std::string, checkpoint_root, "checkpoints",
          "directory, shared with every worker, under which each run gets "
          "sweep-<S>/run-<R>/ for its checkpoints");
ABSL_FLAG(std::string, credentials_file, "",
          "file of credentials, one \"SCOPE NAME SECRET\" per line (scopes user, read, "
          "worker; docs/security.md); when empty, the lines are read from the environment "
          "variable XMOD_CREDENTIALS, and when that is unset too there is no authentication "
          "and only loopback addresses may be listened on (see --insecure)");
ABSL_FLAG(bool, insecure, false,
          "allow --listen / --http_listen beyond loopback without credentials (anyone who "
          "can connect gets full access)");
ABSL_FLAG(std::string, token, "",
          "removed: a secret on the command line is visible to every local user (ps); "
          "use --credentials_file");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate (chain) of the server: gRPC over TLS and the HTTP API over HTTPS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA: gRPC clients must present a certificate it signed (mutual TLS)");
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
      "--metrics_listen=0.0.0.0:9464 --credentials_file=/etc/xmod/credentials "
      "--tls_cert=/etc/xmod/tls/server.pem --tls_key=/etc/xmod/tls/server.key");
  absl::FlagsUsageConfig usage;
  // --help lists this file's flags (absl's default looks for <program>.cc).
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "coordinator/main.cc");
  };
  usage.version_string = [] { return xmod::VersionLine("xmod-coordinator") + "\n"; };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;

  xmod::CoordinatorOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.db_path = absl::GetFlag(FLAGS_db);
  options.checkpoint_root = absl::GetFlag(FLAGS_checkpoint_root);
  if (!absl::GetFlag(FLAGS_token).empty()) {
    std::cerr << "--token is no longer accepted (a secret on the command line is visible in "
                 "ps): put credentials in --credentials_file (docs/security.md)\n";
    return 2;
  }
  absl::StatusOr<xmod::CredentialSet> credentials;
  if (const std::string file = absl::GetFlag(FLAGS_credentials_file); !file.empty()) {
    credentials = xmod::CredentialSet::Load(file);
    struct stat info;
    if (stat(file.c_str(), &info) == 0 && (info.st_mode & 077) != 0) {
      LOG(WARNING) << "--credentials_file " << file << " is readable by other users (chmod 600 it)";
    }
  } else if (const char* lines = std::getenv("XMOD_CREDENTIALS"); lines != nullptr) {
    credentials = xmod::CredentialSet::Parse(lines, "XMOD_CREDENTIALS");
  } else {
    credentials = xmod::CredentialSet();
  }
  if (!credentials.ok()) {
    std::cerr << "--credentials_file: " << credentials.status().message() << "\n";
    return 2;
  }
  options.credentials = std::make_shared<const xmod::CredentialSet>(*std::move(credentials));
  options.insecure = absl::GetFlag(FLAGS_insecure);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
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
