// See coordinator.h.
#include "coordinator/coordinator.h"

#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/http_listener.h"
#include "coordinator/adaptive/sweep_monitor.h"
#include "coordinator/api/coordinator_service.h"
#include "coordinator/api/http_server.h"
#include "coordinator/api/standard_services.h"
#include "coordinator/api/user_actions.h"
#include "coordinator/api/worker_gateway_service.h"
#include "coordinator/fitting/fit_trigger.h"
#include "coordinator/spec/data_roots.h"
#include "coordinator/store/database_lock.h"
#include "coordinator/store/run_counts.h"
#include "glog/logging.h"

namespace xmod {

namespace {

// Whether `address` (host:port, as for --listen) is a loopback address.
bool IsLoopback(const std::string& address) {
  absl::StatusOr<std::pair<std::string, int>> split = SplitHostPort(address, "");
  if (!split.ok()) return false;
  const std::string& host = split->first;
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

// Without credentials only loopback listeners, unless --insecure; a warning either way.
absl::Status CheckExposure(const CoordinatorOptions& options) {
  if (!options.credentials->empty()) return absl::OkStatus();
  for (const auto& [flag, address] :
       {std::pair<const char*, std::string>{"--listen", options.listen},
        {"--http_listen", options.http_listen}}) {
    if (address.empty() || IsLoopback(address)) continue;
    if (!options.insecure) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": ", address,
                       " is not a loopback address and no credentials are configured "
                       "(--credentials_file); pass --insecure to serve it unauthenticated anyway"));
    }
    LOG(WARNING) << "--insecure: no credentials configured and " << flag << "=" << address
                 << " is not loopback: anyone who can reach it has full access";
  }
  LOG(WARNING) << "no credentials configured (--credentials_file): every client that can "
                  "connect has full access, workers included";
  return absl::OkStatus();
}

// Writes --ports_file: {"grpc":P,"http":P,"metrics":P,"health":P}.
absl::Status WritePortsFile(const std::string& path, const Ports& ports) {
  const std::string json =
      absl::StrCat("{\"grpc\":", ports.grpc, ",\"http\":", ports.http,
                   ",\"metrics\":", ports.metrics, ",\"health\":", ports.health, "}\n");
  return WriteFileAtomic(path, json);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(const CoordinatorOptions& options) {
  if (absl::Status s = CheckExposure(options); !s.ok()) return s;
  if (absl::Status s = ValidateDataRoots(options.data_roots); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> transport =
      NewServerCredentials(options.tls);
  if (!transport.ok()) return transport.status();
  std::unique_ptr<Coordinator> c(new Coordinator);
  c->options_ = options;
  c->clock_ = options.clock != nullptr ? options.clock : Clock::Real();
  if (absl::Status s = c->OpenStore(); !s.ok()) return s;
  if (absl::Status s = c->StartBackgroundParts(); !s.ok()) return s;
  c->MakeServices();
  // Every listener that a flag can make fail is started before the gRPC server, which
  // workers lease runs through: a coordinator that cannot start has leased nothing.
  if (absl::Status s = c->StartSideListeners(); !s.ok()) return s;
  if (absl::Status s = c->StartGrpc(*transport); !s.ok()) return s;
  c->StartTicker();
  c->LogListening();
  if (!options.ports_file.empty()) {
    if (absl::Status s = WritePortsFile(options.ports_file, c->ports_); !s.ok()) return s;
  }
  // Probes see SERVING only now that every listener is up.
  SetServing(c->grpc_server_.get(), true);
  if (c->health_listener_) SetServing(c->health_listener_->server(), true);
  return c;
}

absl::Status Coordinator::OpenStore() {
  metrics_ = std::make_unique<CoordinatorMetrics>();
  StoreOptions store_options = options_.store;
  CoordinatorMetrics* metrics = metrics_.get();
  store_options.on_commit = [metrics](double seconds, int batch, const absl::Status& status) {
    metrics->ObserveCommit(seconds, batch, status);
  };
  absl::StatusOr<std::unique_ptr<DatabaseLock>> lock = DatabaseLock::Acquire(options_.db_path);
  if (!lock.ok()) return lock.status();
  db_lock_ = *std::move(lock);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options_.db_path, store_options);
  if (!store.ok()) return store.status();
  store_ = *std::move(store);
  return absl::OkStatus();
}

absl::Status Coordinator::StartBackgroundParts() {
  SchedulerOptions scheduler_options;
  scheduler_options.lease_ttl_ms = options_.lease_ttl_ms;
  scheduler_options.heartbeat_interval_ms = options_.heartbeat_interval_ms;
  // A polling worker takes its gang part at once; one lease TTL covers a slow start.
  scheduler_options.gang_start_timeout_ms = options_.lease_ttl_ms;
  scheduler_options.checkpoint_root = options_.checkpoint_root;
  scheduler_options.sharing = options_.sharing;
  // As Ray's GcsServer wires its managers: the metric ingest first, then the run queue (with
  // its worker registry) that keeps the ingest's table of live attempts in step.
  ingest_ = std::make_unique<MetricIngest>(store_.get(), &feed_, metrics_.get(),
                                           options_.max_ingest_writes);
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(
      store_.get(), clock_, &feed_, metrics_.get(), ingest_.get(), scheduler_options);
  if (!scheduler.ok()) return scheduler.status();
  scheduler_ = *std::move(scheduler);
  prometheus::Registry* registry = metrics_->registry().get();
  fit_trigger_ = std::make_unique<FitTrigger>(store_.get(), clock_, registry, FitTriggerOptions());
  adaptive_ = std::make_unique<AdaptiveController>(store_.get(), scheduler_.get(), &feed_, clock_,
                                                   registry, options_.adaptive);
  Scheduler* sched = scheduler_.get();
  sweep_monitor_ = std::make_unique<SweepMonitor>(
      store_.get(), &feed_, metrics_.get(),
      [sched](int64_t run_id, double flops, double live_delta, const std::string& reason) {
        return sched->StopEarly(run_id, flops, live_delta, reason);
      });
  return absl::OkStatus();
}

void Coordinator::MakeServices() {
  actions_ = std::make_unique<UserActions>(store_.get(), scheduler_.get(), fit_trigger_.get());
  CoordinatorServiceOptions user_options;
  user_options.credentials = options_.credentials;
  user_options.check_data_paths = options_.check_data_paths;
  user_options.query_limits = options_.query;
  user_options.watch_limits = options_.watch_streams;
  user_options.data_roots = options_.data_roots;
  user_options.spec_limits.max_ensemble_size = options_.adaptive.max_ensemble_size;
  user_options.actions = actions_.get();
  user_options.adaptive = adaptive_.get();
  user_options.clock = clock_;
  user_options.backup_dir = std::filesystem::path(options_.db_path).parent_path().string();
  if (user_options.backup_dir.empty()) user_options.backup_dir = ".";
  user_service_ = std::make_unique<CoordinatorService>(store_.get(), scheduler_.get(), &feed_,
                                                       metrics_.get(), user_options);
  WorkerGatewayOptions worker_options;
  worker_options.credentials = options_.credentials;
  worker_service_ = std::make_unique<WorkerGatewayService>(
      scheduler_.get(), ingest_.get(), store_.get(), metrics_.get(), worker_options);
}

absl::Status Coordinator::StartSideListeners() {
  if (!options_.http_listen.empty()) {
    HttpServerOptions http;
    http.listen = options_.http_listen;
    http.dashboard_dir = options_.dashboard_dir;
    http.credentials = options_.credentials;
    http.tls_cert_file = options_.tls.cert_file;
    http.tls_key_file = options_.tls.key_file;
    http.sessions = options_.sessions;
    http.clock = clock_;
    http.feed = &feed_;
    http.actions = actions_.get();
    absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(store_.get(), http);
    if (!server.ok()) return server.status();
    http_server_ = *std::move(server);
    ports_.http = http_server_->port();
  }
  if (!options_.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> started = MetricsEndpoint::Start(
        options_.metrics_listen, options_.metrics_access, metrics_->registry());
    if (!started.ok()) return started.status();
    metrics_endpoint_ = *std::move(started);
    ports_.metrics = metrics_endpoint_->port();
  }
  if (!options_.health_listen.empty()) {
    absl::StatusOr<std::unique_ptr<HealthListener>> health =
        HealthListener::Start(options_.health_listen);
    if (!health.ok()) return health.status();
    health_listener_ = *std::move(health);
    ports_.health = health_listener_->port();
    SetServing(health_listener_->server(), false);
  }
  return absl::OkStatus();
}

absl::Status Coordinator::StartGrpc(const std::shared_ptr<grpc::ServerCredentials>& transport) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, transport, &ports_.grpc);
  SetServerMessageLimits(&builder);
  grpc::ResourceQuota quota("xmod-coordinator");
  quota.SetMaxThreads(options_.max_grpc_threads);
  builder.SetResourceQuota(quota);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              std::min(options_.max_idle_grpc_threads, options_.max_grpc_threads));
  builder.RegisterService(user_service_.get());
  builder.RegisterService(worker_service_.get());
  AddStandardServices(&builder, options_.grpc_reflection);
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || ports_.grpc == 0) {
    return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ", options_.listen));
  }
  SetServing(grpc_server_.get(), false);
  return absl::OkStatus();
}

void Coordinator::StartTicker() {
  Tick();
  ticker_ = std::thread([this] {
    while (!stop_ticker_.WaitForNotificationWithTimeout(absl::Milliseconds(options_.tick_ms))) {
      Tick();
    }
  });
}

void Coordinator::LogListening() const {
  const CoordinatorOptions& o = options_;
  LOG(INFO) << "xmod-coordinator: gRPC" << (o.tls.enabled() ? " (TLS" : "")
            << (!o.tls.client_ca_file.empty() ? ", client certificates required)"
                : o.tls.enabled()             ? ")"
                                              : "")
            << " on port " << ports_.grpc << ", HTTP" << (o.tls.enabled() ? "S" : "") << " on port "
            << ports_.http << ", metrics"
            << (o.metrics_access.tls_cert_file.empty() ? "" : " (HTTPS)") << " on port "
            << ports_.metrics << ", health on port " << ports_.health << ", database " << o.db_path
            << ", " << o.credentials->size() << " credentials";
  if (o.data_roots.empty()) {
    LOG(INFO) << "xmod-coordinator: no --data_root: sweeps' data globs are not looked up";
  }
}

void Coordinator::Tick() {
  scheduler_->ExpireLeases();
  scheduler_->Preempt();
  // The first poll (at start) also schedules the refits a restart left owing.
  if (absl::Status s = fit_trigger_->Poll(); !s.ok()) LOG(WARNING) << "fit poll: " << s;
  if (absl::Status s = sweep_monitor_->Poll(); !s.ok()) LOG(WARNING) << "live delta: " << s;
  adaptive_->Poll();
  std::map<std::string, int> counts;
  absl::Status s = store_->Read([&counts](Db& db) {
    absl::StatusOr<std::map<std::string, int>> read = CountRunsByState(db);
    if (!read.ok()) return read.status();
    counts = *std::move(read);
    return absl::OkStatus();
  });
  if (s.ok()) {
    metrics_->SetRunCounts(counts);
  } else {
    LOG(WARNING) << "run counts: " << s;
  }
}

void Coordinator::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  LOG(INFO) << "xmod-coordinator: shutting down";
  // Probes see the drain from its first moment.
  if (health_listener_) MarkNotServing(health_listener_->server());
  MarkNotServing(grpc_server_.get());
  stop_ticker_.Notify();
  if (ticker_.joinable()) ticker_.join();
  // Start() may have failed part way: stop only what exists.
  if (fit_trigger_) fit_trigger_->Shutdown();  // a running fit is cancelled, stores nothing
  if (adaptive_) adaptive_->Shutdown();        // a decision in progress stops, stores nothing
  if (scheduler_) scheduler_->Shutdown();
  if (user_service_) user_service_->Stop();
  if (grpc_server_) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  if (health_listener_) health_listener_->Shutdown();
  if (http_server_) http_server_->Stop();
  if (metrics_endpoint_) metrics_endpoint_->Stop();
  if (store_) store_->Close();  // every accepted write is committed
  LOG(INFO) << "xmod-coordinator: stopped";
}

Coordinator::~Coordinator() { Shutdown(); }

absl::Status RunCoordinator(const CoordinatorOptions& options) {
  // Block the signals in every thread (threads inherit the mask); sigwait picks them up.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(options);
  if (!coordinator.ok()) return coordinator.status();
  int signal = 0;
  sigwait(&signals, &signal);
  LOG(INFO) << "xmod-coordinator: got signal " << signal;
  (*coordinator)->Shutdown();
  return absl::OkStatus();
}

absl::StatusOr<BackupInfo> RestoreFromBackup(const std::string& backup, const std::string& db_path,
                                             Clock* clock) {
  absl::StatusOr<std::unique_ptr<DatabaseLock>> lock = DatabaseLock::Acquire(db_path);
  if (!lock.ok()) return lock.status();
  return RestoreDatabase(backup, db_path, clock->NowMillis());
}

}  // namespace xmod
