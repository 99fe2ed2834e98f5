// See coordinator.h.
#include "coordinator/coordinator.h"

#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <signal.h>

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/http_listener.h"
#include "coordinator/api/coordinator_service.h"
#include "coordinator/api/http_server.h"
#include "coordinator/api/standard_services.h"
#include "coordinator/api/worker_gateway_service.h"
#include "coordinator/design/sweep_monitor.h"
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

}  // namespace

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(const CoordinatorOptions& options) {
  if (absl::Status s = CheckExposure(options); !s.ok()) return s;
  if (absl::Status s = ValidateDataRoots(options.data_roots); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> transport =
      NewServerCredentials(options.tls);
  if (!transport.ok()) return transport.status();
  std::unique_ptr<Coordinator> c(new Coordinator);
  c->options_ = options;
  Clock* clock = options.clock != nullptr ? options.clock : Clock::Real();
  c->metrics_ = std::make_unique<CoordinatorMetrics>();

  StoreOptions store_options = options.store;
  CoordinatorMetrics* metrics = c->metrics_.get();
  store_options.on_commit = [metrics](double seconds, int batch) {
    metrics->ObserveCommit(seconds, batch);
  };
  absl::StatusOr<std::unique_ptr<DatabaseLock>> lock = DatabaseLock::Acquire(options.db_path);
  if (!lock.ok()) return lock.status();
  c->db_lock_ = *std::move(lock);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options.db_path, store_options);
  if (!store.ok()) return store.status();
  c->store_ = *std::move(store);

  SchedulerOptions scheduler_options;
  scheduler_options.lease_ttl_ms = options.lease_ttl_ms;
  scheduler_options.heartbeat_interval_ms = options.heartbeat_interval_ms;
  // A polling worker takes its gang part at once; one lease TTL covers a slow start.
  scheduler_options.gang_start_timeout_ms = options.lease_ttl_ms;
  scheduler_options.checkpoint_root = options.checkpoint_root;
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler =
      Scheduler::Create(c->store_.get(), clock, &c->feed_, metrics, scheduler_options);
  if (!scheduler.ok()) return scheduler.status();
  c->scheduler_ = *std::move(scheduler);
  c->fit_trigger_ = std::make_unique<FitTrigger>(c->store_.get(), clock, metrics->registry().get(),
                                                 FitTriggerOptions());
  c->adaptive_ = std::make_unique<AdaptiveController>(c->store_.get(), c->scheduler_.get(), clock,
                                                      metrics->registry().get(), options.adaptive);
  Scheduler* sched = c->scheduler_.get();
  c->sweep_monitor_ = std::make_unique<SweepMonitor>(
      c->store_.get(), &c->feed_, metrics,
      [sched](int64_t run_id, double flops, double live_delta, const std::string& reason) {
        return sched->StopEarly(run_id, flops, live_delta, reason);
      });

  CoordinatorServiceOptions user_options;
  user_options.credentials = options.credentials;
  user_options.check_data_paths = options.check_data_paths;
  user_options.query_limits = options.query;
  user_options.watch_limits = options.watch_streams;
  user_options.data_roots = options.data_roots;
  user_options.spec_limits.max_ensemble_size = options.adaptive.max_ensemble_size;
  user_options.fit_trigger = c->fit_trigger_.get();
  user_options.adaptive = c->adaptive_.get();
  user_options.clock = clock;
  c->user_service_ = std::make_unique<CoordinatorService>(c->store_.get(), c->scheduler_.get(),
                                                          &c->feed_, metrics, user_options);
  WorkerGatewayOptions worker_options;
  worker_options.credentials = options.credentials;
  c->worker_service_ = std::make_unique<WorkerGatewayService>(c->scheduler_.get(), c->store_.get(),
                                                              metrics, worker_options);

  // Every listener that a flag can make fail is started before the gRPC server, which
  // workers lease runs through: a coordinator that cannot start has leased nothing.
  if (!options.http_listen.empty()) {
    HttpServerOptions http;
    http.listen = options.http_listen;
    http.dashboard_dir = options.dashboard_dir;
    http.credentials = options.credentials;
    http.tls_cert_file = options.tls.cert_file;
    http.tls_key_file = options.tls.key_file;
    http.sessions = options.sessions;
    http.clock = clock;
    absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(c->store_.get(), http);
    if (!server.ok()) return server.status();
    c->http_server_ = *std::move(server);
    c->ports_.http = c->http_server_->port();
  }
  if (!options.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> started =
        MetricsEndpoint::Start(options.metrics_listen, options.metrics_access, metrics->registry());
    if (!started.ok()) return started.status();
    c->metrics_endpoint_ = *std::move(started);
    c->ports_.metrics = c->metrics_endpoint_->port();
  }
  if (!options.health_listen.empty()) {
    absl::StatusOr<std::unique_ptr<HealthListener>> health =
        HealthListener::Start(options.health_listen);
    if (!health.ok()) return health.status();
    c->health_listener_ = *std::move(health);
    c->ports_.health = c->health_listener_->port();
    SetServing(c->health_listener_->server(), false);
  }

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *transport, &c->ports_.grpc);
  SetServerMessageLimits(&builder);
  grpc::ResourceQuota quota("xmod-coordinator");
  quota.SetMaxThreads(options.max_grpc_threads);
  builder.SetResourceQuota(quota);
  builder.RegisterService(c->user_service_.get());
  builder.RegisterService(c->worker_service_.get());
  AddStandardServices(&builder, options.grpc_reflection);
  c->grpc_server_ = builder.BuildAndStart();
  if (c->grpc_server_ == nullptr || c->ports_.grpc == 0) {
    return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ", options.listen));
  }
  SetServing(c->grpc_server_.get(), false);

  c->Tick();
  Coordinator* raw = c.get();
  c->ticker_ = std::thread([raw] {
    while (!raw->stop_ticker_.WaitForNotificationWithTimeout(
        absl::Milliseconds(raw->options_.tick_ms))) {
      raw->Tick();
    }
  });

  LOG(INFO) << "xmod-coordinator: gRPC" << (options.tls.enabled() ? " (TLS" : "")
            << (!options.tls.client_ca_file.empty() ? ", client certificates required)"
                : options.tls.enabled()             ? ")"
                                                    : "")
            << " on port " << c->ports_.grpc << ", HTTP" << (options.tls.enabled() ? "S" : "")
            << " on port " << c->ports_.http << ", metrics"
            << (options.metrics_access.tls_cert_file.empty() ? "" : " (HTTPS)") << " on port "
            << c->ports_.metrics << ", health on port " << c->ports_.health << ", database "
            << options.db_path << ", " << options.credentials->size() << " credentials";
  if (options.data_roots.empty()) {
    LOG(INFO) << "xmod-coordinator: no --data_root: sweeps' data globs are not looked up";
  }
  if (!options.ports_file.empty()) {
    const std::string json =
        absl::StrCat("{\"grpc\":", c->ports_.grpc, ",\"http\":", c->ports_.http,
                     ",\"metrics\":", c->ports_.metrics, ",\"health\":", c->ports_.health, "}\n");
    if (absl::Status s = WriteFileAtomic(options.ports_file, json); !s.ok()) return s;
  }
  // Probes see SERVING only now that every listener is up.
  SetServing(c->grpc_server_.get(), true);
  if (c->health_listener_) SetServing(c->health_listener_->server(), true);
  return c;
}

void Coordinator::Tick() {
  scheduler_->ExpireLeases();
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

}  // namespace xmod
