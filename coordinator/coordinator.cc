// See coordinator.h.
#include "coordinator/coordinator.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <signal.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/fit_trigger.h"
#include "coordinator/http_server.h"
#include "coordinator/worker_gateway_service.h"
#include "glog/logging.h"
#include "prometheus/exposer.h"

namespace xmod {

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(const CoordinatorOptions& options) {
  std::unique_ptr<Coordinator> c(new Coordinator);
  c->options_ = options;
  Clock* clock = options.clock != nullptr ? options.clock : Clock::Real();
  c->metrics_ = std::make_unique<CoordinatorMetrics>();

  StoreOptions store_options = options.store;
  CoordinatorMetrics* metrics = c->metrics_.get();
  store_options.on_commit = [metrics](double seconds, int batch) {
    metrics->ObserveCommit(seconds, batch);
  };
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options.db_path, store_options);
  if (!store.ok()) return store.status();
  c->store_ = *std::move(store);

  SchedulerOptions scheduler_options;
  scheduler_options.lease_ttl_ms = options.lease_ttl_ms;
  scheduler_options.heartbeat_interval_ms = options.heartbeat_interval_ms;
  scheduler_options.checkpoint_root = options.checkpoint_root;
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler =
      Scheduler::Create(c->store_.get(), clock, &c->feed_, metrics, scheduler_options);
  if (!scheduler.ok()) return scheduler.status();
  c->scheduler_ = *std::move(scheduler);
  c->fit_trigger_ = std::make_unique<FitTrigger>(c->store_.get(), clock, metrics->registry().get(),
                                                 FitTriggerOptions());

  CoordinatorServiceOptions user_options;
  user_options.token = options.token;
  user_options.check_data_paths = options.check_data_paths;
  c->user_service_ = std::make_unique<CoordinatorService>(c->store_.get(), c->scheduler_.get(),
                                                          &c->feed_, metrics, user_options);
  WorkerGatewayOptions worker_options;
  worker_options.token = options.token;
  c->worker_service_ =
      std::make_unique<WorkerGatewayService>(c->scheduler_.get(), metrics, worker_options);

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &c->ports_.grpc);
  builder.RegisterService(c->user_service_.get());
  builder.RegisterService(c->worker_service_.get());
  c->grpc_server_ = builder.BuildAndStart();
  if (c->grpc_server_ == nullptr || c->ports_.grpc == 0) {
    return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ", options.listen));
  }

  if (!options.http_listen.empty()) {
    HttpServerOptions http;
    http.listen = options.http_listen;
    http.dashboard_dir = options.dashboard_dir;
    http.token = options.token;
    absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(c->store_.get(), http);
    if (!server.ok()) return server.status();
    c->http_server_ = *std::move(server);
    c->ports_.http = c->http_server_->port();
  }
  if (!options.metrics_listen.empty()) {
    try {
      c->exposer_ = std::make_unique<prometheus::Exposer>(options.metrics_listen);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("--metrics_listen: cannot listen on ",
                                                 options.metrics_listen, ": ", e.what()));
    }
    c->exposer_->RegisterCollectable(metrics->registry());
    const std::vector<int> ports = c->exposer_->GetListeningPorts();
    c->ports_.metrics = ports.empty() ? 0 : ports.front();
  }

  c->Tick();
  Coordinator* raw = c.get();
  c->ticker_ = std::thread([raw] {
    while (!raw->stop_ticker_.WaitForNotificationWithTimeout(
        absl::Milliseconds(raw->options_.tick_ms))) {
      raw->Tick();
    }
  });

  LOG(INFO) << "xmod-coordinator: gRPC on port " << c->ports_.grpc << ", HTTP on port "
            << c->ports_.http << ", metrics on port " << c->ports_.metrics << ", database "
            << options.db_path;
  if (!options.ports_file.empty()) {
    const std::string json =
        absl::StrCat("{\"grpc\":", c->ports_.grpc, ",\"http\":", c->ports_.http,
                     ",\"metrics\":", c->ports_.metrics, "}\n");
    if (absl::Status s = WriteFileAtomic(options.ports_file, json); !s.ok()) return s;
  }
  return c;
}

void Coordinator::Tick() {
  scheduler_->ExpireLeases();
  // The first poll (at start) also schedules the refits a restart left owing.
  if (absl::Status s = fit_trigger_->Poll(); !s.ok()) LOG(WARNING) << "fit poll: " << s;
  std::map<std::string, int> counts;
  absl::Status s = store_->Read([&counts](Db& db) {
    absl::StatusOr<Stmt> stmt = db.Prepare("SELECT state, COUNT(*) FROM runs GROUP BY state");
    if (!stmt.ok()) return stmt.status();
    while (true) {
      absl::StatusOr<bool> row = stmt->Step();
      if (!row.ok()) return row.status();
      if (!*row) return absl::OkStatus();
      counts[stmt->Text(0)] = static_cast<int>(stmt->Int(1));
    }
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
  stop_ticker_.Notify();
  if (ticker_.joinable()) ticker_.join();
  // Start() may have failed part way: stop only what exists.
  if (fit_trigger_) fit_trigger_->Shutdown();  // a running fit finishes and stores its row
  if (scheduler_) scheduler_->Shutdown();
  if (user_service_) user_service_->Stop();
  if (grpc_server_) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  if (http_server_) http_server_->Stop();
  exposer_.reset();
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
