// xmod-coordinator: parses flags into CoordinatorOptions and runs the coordinator until
// SIGTERM or SIGINT (then shuts down gracefully, draining the database writer).
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/command_line.h"
#include "coordinator/coordinator.h"
#include "coordinator/scheduling/sharing_config.h"
#include "coordinator/spec/data_roots.h"
#include "glog/logging.h"

namespace {

// What the command line sets: the options and the two flags main checks itself.
struct Flags {
  xmod::CoordinatorOptions options;
  std::string credentials_file;
  std::string sharing_config;
  std::string token;         // --token, removed: refused when given
  std::string restore_from;  // restore this backup as --db, then exit
};

// --listen, --db, --checkpoint_root and the credential and TLS flags.
void AddServerFlags(CLI::App& app, Flags* flags) {
  xmod::CoordinatorOptions& options = flags->options;
  app.add_option("--listen", options.listen,
                 "gRPC address host:port for users (xmodctl) and workers; port 0 picks a free "
                 "port");
  app.add_option("--db", options.db_path, "SQLite database file (WAL mode); created if missing");
  app.add_option("--restore_from", flags->restore_from,
                 "restore this backup (xmodctl admin backup) as --db and exit, serving nothing: "
                 "it is checked first, and the database it replaces is moved aside to "
                 "<db>.before-restore-<unix ms>, never deleted; the coordinator must be stopped");
  app.add_option("--checkpoint_root", options.checkpoint_root,
                 "directory, shared with every worker, under which each run gets "
                 "sweep-<S>/run-<R>/ for its checkpoints");
  app.add_option("--sharing_config", flags->sharing_config,
                 "xmod.v1.SharingConfig in protobuf text format: GPU and CPU slot quotas and "
                 "fair-share weights per user credential name (docs/operations.md, \"Sharing a "
                 "cluster\"); read at start only. Empty: no quotas, every weight 1");
  app.add_option("--credentials_file", flags->credentials_file,
                 "file of credentials, one \"SCOPE NAME SECRET\" per line (scopes user, read, "
                 "worker; docs/security.md); when empty, the lines are read from the "
                 "environment variable XMOD_CREDENTIALS, and when that is unset too there is no "
                 "authentication and only loopback addresses may be listened on (see "
                 "--insecure)");
  app.add_flag("--insecure", options.insecure,
               "allow --listen / --http_listen beyond loopback without credentials (anyone who "
               "can connect gets full access)");
  app.add_option("--token", flags->token,
                 "removed: a secret on the command line is visible to every local user (ps); "
                 "use --credentials_file");
  app.add_option("--tls_cert", options.tls.cert_file,
                 "PEM certificate (chain) of the server: gRPC over TLS and the HTTP API over "
                 "HTTPS");
  app.add_option("--tls_key", options.tls.key_file, "PEM private key of --tls_cert");
  app.add_option("--tls_client_ca", options.tls.client_ca_file,
                 "PEM CA: gRPC clients must present a certificate it signed (mutual TLS)");
}

// The HTTP, metrics and health listeners, gRPC reflection and the dashboard's files.
void AddListenerFlags(CLI::App& app, xmod::CoordinatorOptions& options) {
  app.add_option("--http_listen", options.http_listen,
                 "host:port of the web dashboard and its JSON API (/api/...); port 0 picks a "
                 "free port; empty disables");
  app.add_option("--metrics_listen", options.metrics_listen,
                 "host:port of the Prometheus /metrics endpoint; port 0 picks a free port; "
                 "empty disables");
  xmod::AddMetricsAccessFlags(app, &options.metrics_access);
  app.add_option("--health_listen", options.health_listen,
                 "host:port of a plaintext gRPC listener serving only grpc.health.v1.Health, "
                 "without credentials (for Kubernetes' grpc probe); empty: none (the health "
                 "service is on --listen as well)");
  app.add_flag("--grpc_reflection", options.grpc_reflection,
               "serve gRPC server reflection on --listen (grpcurl without the .proto files); "
               "it answers without credentials and reveals the API's schema only");
  app.add_option("--dashboard_dir", options.dashboard_dir,
                 "directory of the dashboard's static files, served at /");
}

// Leases, --ports_file, the gRPC thread cap and the sweeps' data roots.
void AddRunFlags(CLI::App& app, xmod::CoordinatorOptions& options) {
  app.add_option("--lease_ttl_ms", options.lease_ttl_ms,
                 "an attempt whose worker has not heartbeated for this long is lost and its run "
                 "requeued");
  app.add_option("--heartbeat_interval_ms", options.heartbeat_interval_ms,
                 "heartbeat period told to workers");
  app.add_option("--ports_file", options.ports_file,
                 "once listening, write {\"grpc\":P,\"http\":P,\"metrics\":P,\"health\":P} to "
                 "this file (0 = disabled listener)");
  app.add_option("--max_ingest_writes", options.max_ingest_writes,
                 "metric batches written at once; more wait (scheduling writes overtake them in "
                 "the database's writer)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max_grpc_threads", options.max_grpc_threads,
                 "threads of the gRPC server at most; each WatchSweep stream and each worker's "
                 "long poll holds one, and calls past the cap are refused (RESOURCE_EXHAUSTED)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max_idle_grpc_threads", options.max_idle_grpc_threads,
                 "idle threads the gRPC server keeps waiting for calls; a busier coordinator "
                 "starts and ends a thread per call past them")
      ->check(CLI::PositiveNumber);
  app.add_flag("--check_data_paths,!--nocheck_data_paths", options.check_data_paths,
               "refuse sweeps whose data globs match no file under a --data_root "
               "(--check_data_paths=false: accept them)");
  app.add_option("--data_root", options.data_roots,
                 "absolute directory (repeatable, or comma-separated) under which sweeps' data "
                 "globs must lie; SubmitSweep, dry runs included, refuses a glob outside every "
                 "root and, with --check_data_paths, one matching no file under a root; none: "
                 "data globs are not looked up")
      ->delimiter(',');
}

// --credentials_file, else the lines of $XMOD_CREDENTIALS, else none (no authentication).
absl::StatusOr<xmod::CredentialSet> LoadCredentials(const std::string& file) {
  if (!file.empty()) {
    absl::StatusOr<xmod::CredentialSet> credentials = xmod::CredentialSet::Load(file);
    struct stat info;
    if (stat(file.c_str(), &info) == 0 && (info.st_mode & 077) != 0) {
      LOG(WARNING) << "--credentials_file " << file << " is readable by other users (chmod 600 it)";
    }
    return credentials;
  }
  if (const char* lines = std::getenv("XMOD_CREDENTIALS"); lines != nullptr) {
    return xmod::CredentialSet::Parse(lines, "XMOD_CREDENTIALS");
  }
  return xmod::CredentialSet();
}

// Loads the credentials into flags->options and checks the flags together; the error's
// message is what main prints before exiting with 2.
absl::Status FinishFlags(Flags* flags) {
  if (!flags->token.empty()) {
    return absl::InvalidArgumentError(
        "--token is no longer accepted (a secret on the command line is visible in ps): put "
        "credentials in --credentials_file (docs/security.md)");
  }
  absl::StatusOr<xmod::CredentialSet> credentials = LoadCredentials(flags->credentials_file);
  if (!credentials.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--credentials_file: ", credentials.status().message()));
  }
  xmod::CoordinatorOptions& options = flags->options;
  options.credentials = std::make_shared<const xmod::CredentialSet>(*std::move(credentials));
  if (absl::Status s = xmod::ValidateDataRoots(options.data_roots); !s.ok()) return s;
  absl::StatusOr<xmod::scheduling::SharingPolicy> sharing =
      xmod::scheduling::LoadSharingPolicy(flags->sharing_config);
  if (!sharing.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sharing_config: ", sharing.status().message()));
  }
  options.sharing = *std::move(sharing);
  if (options.lease_ttl_ms <= options.heartbeat_interval_ms) {
    return absl::InvalidArgumentError("--lease_ttl_ms must exceed --heartbeat_interval_ms");
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG, which leaves the mutex deadlock detector on: a
  // lock-order graph updated on every Lock, whose library alone took 0.8% of the coordinator's
  // CPU samples (perf) under bench/load's metric traffic. The tests keep it on, and catch
  // lock-order cycles there.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Flags flags;
  flags.options.dashboard_dir = XMOD_DEFAULT_DASHBOARD_DIR;
  CLI::App app{
      "xmod-coordinator: the xmod service. Stores sweeps, runs and metrics in SQLite, leases "
      "runs to xmod-worker processes, serves the Coordinator API (xmodctl), the WorkerGateway "
      "API, a web dashboard and Prometheus metrics.\n"
      "Example: xmod-coordinator --listen=0.0.0.0:7070 --db=/var/lib/xmod/xmod.db "
      "--checkpoint_root=/shared/xmod/checkpoints --http_listen=0.0.0.0:8080 "
      "--metrics_listen=0.0.0.0:9464 --credentials_file=/etc/xmod/credentials "
      "--tls_cert=/etc/xmod/tls/server.pem --tls_key=/etc/xmod/tls/server.key"};
  xmod::AddVersionFlag(app, "xmod-coordinator");
  app.option_defaults()->always_capture_default();
  AddServerFlags(app, &flags);
  AddListenerFlags(app, flags.options);
  AddRunFlags(app, flags.options);
  if (std::optional<int> exit = xmod::ParseCommandLine(app, argc, argv)) return *exit;
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (absl::Status s = FinishFlags(&flags); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  if (!flags.restore_from.empty()) {
    absl::StatusOr<xmod::BackupInfo> restored =
        xmod::RestoreFromBackup(flags.restore_from, flags.options.db_path, xmod::Clock::Real());
    if (!restored.ok()) {
      std::cerr << "--restore_from: " << restored.status().message() << "\n";
      return 1;
    }
    std::cout << "restored " << flags.restore_from << " as " << flags.options.db_path << " ("
              << restored->bytes << " bytes, sha256 " << restored->sha256 << ", schema version "
              << restored->schema_version << "); start the coordinator on it\n";
    return 0;
  }
  absl::Status status = xmod::RunCoordinator(flags.options);
  if (!status.ok()) {
    LOG(ERROR) << status;
    return 1;
  }
  return 0;
}
