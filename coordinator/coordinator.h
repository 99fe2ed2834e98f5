// Coordinator: assembles the xmod-coordinator process from its parts — store, metric ingest,
// scheduler, the two gRPC services (with grpc.health.v1.Health and, optionally, server
// reflection), the HTTP dashboard API, the Prometheus endpoint, the fit trigger (background
// scaling-law refits) and a ticker that expires leases, refreshes gauges and polls for
// sweeps to refit. main.cc parses flags into CoordinatorOptions and calls
// RunCoordinator(); tests start a Coordinator in-process on loopback ports.
// Thread-safe: Start once, then Shutdown from any thread.
#ifndef XMOD_COORDINATOR_COORDINATOR_H_
#define XMOD_COORDINATOR_COORDINATOR_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/credentials.h"
#include "common/metrics_endpoint.h"
#include "common/transport.h"
#include "coordinator/adaptive/adaptive_controller.h"
#include "coordinator/api/http_sessions.h"
#include "coordinator/api/stream_caps.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/scheduling/metric_ingest.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/store/backup.h"
#include "coordinator/store/change_feed.h"
#include "coordinator/store/store.h"

namespace xmod {

class CoordinatorService;
class DatabaseLock;
class FitTrigger;
class HealthListener;
class SweepMonitor;
class UserActions;
class WorkerGatewayService;
class HttpServer;

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:7070";  // gRPC host:port; port 0 picks a free one
  std::string db_path = "xmod.db";
  std::string checkpoint_root = "checkpoints";
  // Who may call (common/credentials.h); empty = no authentication, and then only loopback
  // addresses may be listened on unless `insecure`. Never null.
  std::shared_ptr<const CredentialSet> credentials = std::make_shared<CredentialSet>();
  bool insecure = false;  // allow non-loopback listeners without credentials
  // Quotas, weights and preemption hysteresis (--sharing_config).
  scheduling::SharingPolicy sharing;
  // gRPC TLS (and mTLS with client_ca_file); cert and key also serve the HTTP API as HTTPS.
  ServerTlsFiles tls;
  std::string http_listen = "127.0.0.1:0";     // empty = no HTTP server
  std::string metrics_listen = "127.0.0.1:0";  // empty = no Prometheus endpoint
  MetricsAccess metrics_access;                // HTTPS and a bearer token for /metrics
  // A plaintext gRPC listener serving only grpc.health.v1.Health (for probes that speak
  // neither TLS nor tokens, e.g. Kubernetes' grpc probe); empty = none. The health service is
  // on `listen` too.
  std::string health_listen;
  bool grpc_reflection = false;  // serve gRPC server reflection on `listen`
  std::string dashboard_dir;
  std::string ports_file;  // {"grpc":P,"http":P,"metrics":P,"health":P} once listening
  int64_t lease_ttl_ms = 30000;
  int64_t heartbeat_interval_ms = 2000;
  // Metric batches being written at once (MetricIngest); more wait. Scheduling writes
  // overtake them in the store (its bulk lane, whose transactions end with them). In
  // bench/load, 32 stored 7-12% more points a second than 8 at the same heartbeat and
  // hand-off latencies; 64 made both slower.
  int max_ingest_writes = 32;
  int64_t tick_ms = 500;  // lease expiry / gauge refresh / refit poll period
  bool check_data_paths = true;
  // Absolute directories the sweeps' data globs must lie under (--data_root, data_roots.h);
  // empty: data globs are not looked up.
  std::vector<std::string> data_roots;
  StoreOptions store;
  QueryLimits query;           // ceilings of Query
  StreamLimits watch_streams;  // open WatchSweep streams
  SessionLimits sessions;      // dashboard sign-ins
  // Threads of the gRPC server (ResourceQuota::SetMaxThreads); past it a call is refused with
  // RESOURCE_EXHAUSTED. Each WatchSweep stream and each worker's long poll holds one.
  int max_grpc_threads = 1024;
  // Idle threads the gRPC server keeps waiting for calls (SyncServerOption::MAX_POLLERS); a
  // thread that finishes a call while this many wait exits, and the next call past them
  // starts a new one. gRPC's default of 2 made a thread per call under bench/load's 200
  // workers; 256 took metric ingest from about 0.36 to 0.43 of raw inserts there.
  int max_idle_grpc_threads = 256;
  // The adaptive controller's ensemble limit and test hook.
  AdaptiveControllerOptions adaptive;
  Clock* clock = nullptr;  // null = the real clock
};

struct Ports {
  int grpc = 0;
  int http = 0;     // 0 when disabled
  int metrics = 0;  // 0 when disabled
  int health = 0;   // 0 when disabled
};

class Coordinator {
 public:
  // Takes the database's lock (database_lock.h: FAILED_PRECONDITION naming the holder when
  // another coordinator has it), opens the store, rebuilds the scheduler, binds every
  // listener and starts serving; the health service answers SERVING from then on.
  // INVALID_ARGUMENT naming the flag when a listener is not on loopback while no credentials
  // are configured and `insecure` is off, or when a TLS file cannot be loaded.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(const CoordinatorOptions& options);
  ~Coordinator();

  const Ports& ports() const { return ports_; }
  // Turns the health service to NOT_SERVING, stops listeners, ends streams and long polls,
  // drains the store's writer. Idempotent.
  void Shutdown();

  Store* store() { return store_.get(); }
  Scheduler* scheduler() { return scheduler_.get(); }
  FitTrigger* fit_trigger() { return fit_trigger_.get(); }
  AdaptiveController* adaptive() { return adaptive_.get(); }

 private:
  Coordinator() = default;
  // The steps of Start, in order. OpenStore takes the database's lock and opens the store
  // (with metrics_); StartBackgroundParts rebuilds the scheduler from the store and makes the
  // fit trigger, adaptive controller and sweep monitor; MakeServices the user actions (shared
  // by the user API and the dashboard) and the two gRPC services;
  // StartSideListeners binds HTTP, metrics and health (whichever the options name);
  // StartGrpc binds `listen` and serves (NOT_SERVING until Start ends); StartTicker ticks once,
  // then every tick_ms in its thread.
  absl::Status OpenStore();
  absl::Status StartBackgroundParts();
  void MakeServices();
  absl::Status StartSideListeners();
  absl::Status StartGrpc(const std::shared_ptr<grpc::ServerCredentials>& transport);
  void StartTicker();
  void LogListening() const;
  void Tick();

  CoordinatorOptions options_;
  Clock* clock_ = nullptr;  // options_.clock, or the real clock
  Ports ports_;
  std::unique_ptr<DatabaseLock> db_lock_;  // held until after the store closed
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<Store> store_;
  ChangeFeed feed_;
  // The scheduler's owners (scheduler.h, "Owners"): the ingest outlives the run queue.
  std::unique_ptr<MetricIngest> ingest_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<FitTrigger> fit_trigger_;
  std::unique_ptr<AdaptiveController> adaptive_;
  std::unique_ptr<SweepMonitor> sweep_monitor_;
  std::unique_ptr<UserActions> actions_;
  std::unique_ptr<CoordinatorService> user_service_;
  std::unique_ptr<WorkerGatewayService> worker_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<HealthListener> health_listener_;  // --health_listen
  std::unique_ptr<HttpServer> http_server_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  absl::Notification stop_ticker_;
  std::thread ticker_;
  bool shut_down_ = false;
};

// Starts a coordinator, waits for SIGTERM or SIGINT, shuts down gracefully. For main().
absl::Status RunCoordinator(const CoordinatorOptions& options);

// xmod-coordinator --restore_from (docs/operations.md, "Backup"): takes the database's lock
// (FAILED_PRECONDITION naming the coordinator that holds it: stop it first), then restores
// `backup` as `db_path` (store/backup.h: checked first; what was there moved aside, never
// deleted). Serves nothing; returns what was restored.
absl::StatusOr<BackupInfo> RestoreFromBackup(const std::string& backup, const std::string& db_path,
                                             Clock* clock);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_COORDINATOR_H_
