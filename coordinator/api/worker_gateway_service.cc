// See worker_gateway_service.h.
#include "coordinator/api/worker_gateway_service.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "coordinator/api/service_util.h"
#include "coordinator/api/worker_request_limits.h"

namespace xmod {

using grpc::ServerContext;

namespace {

// The address part of a gRPC peer ("ipv4:10.0.0.2:5000", "ipv6:[::1]:5000", URI-escaped
// brackets too); empty for other kinds (e.g. unix sockets).
std::string PeerHost(const std::string& peer) {
  std::string address;
  if (absl::StartsWith(peer, "ipv4:")) {
    address = peer.substr(5);
  } else if (absl::StartsWith(peer, "ipv6:")) {
    address = absl::StrReplaceAll(peer.substr(5), {{"%5B", "["}, {"%5D", "]"}});
  } else {
    return "";
  }
  address = address.substr(0, address.rfind(':'));
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  return address;
}

}  // namespace

WorkerGatewayService::WorkerGatewayService(Scheduler* scheduler, MetricIngest* ingest, Store* store,
                                           CoordinatorMetrics* metrics,
                                           WorkerGatewayOptions options)
    : scheduler_(scheduler),
      ingest_(ingest),
      metrics_(metrics),
      options_(std::move(options)),
      identity_(store) {}

grpc::Status WorkerGatewayService::Register(ServerContext* context,
                                            const xmod::v1::RegisterRequest* request,
                                            xmod::v1::RegisterResponse* response) {
  return Serve("Register", Access::kWorker, *options_.credentials, context, metrics_,
               [&](const Principal& caller) -> absl::Status {
                 if (absl::Status s = identity_.CheckRegister(caller, request->worker_name());
                     !s.ok()) {
                   return s;
                 }
                 if (absl::Status s = CheckLimits(*request); !s.ok()) return s;
                 xmod::v1::RegisterRequest registration = *request;
                 if (registration.advertise_host().empty()) {
                   registration.set_advertise_host(PeerHost(context->peer()));
                 }
                 absl::StatusOr<xmod::v1::RegisterResponse> r = scheduler_->Register(registration);
                 if (!r.ok()) return r.status();
                 identity_.Remember(r->worker_id(), request->worker_name());
                 *response = *std::move(r);
                 return absl::OkStatus();
               });
}

grpc::Status WorkerGatewayService::Heartbeat(ServerContext* context,
                                             const xmod::v1::HeartbeatRequest* request,
                                             xmod::v1::HeartbeatResponse* response) {
  return Serve("Heartbeat", Access::kWorker, *options_.credentials, context, metrics_,
               [&](const Principal& caller) -> absl::Status {
                 if (absl::Status s = identity_.CheckWorker(caller, request->worker_id());
                     !s.ok()) {
                   return s;
                 }
                 if (absl::Status s = CheckLimits(*request); !s.ok()) return s;
                 absl::StatusOr<xmod::v1::HeartbeatResponse> r = scheduler_->Heartbeat(*request);
                 if (!r.ok()) return r.status();
                 *response = *std::move(r);
                 return absl::OkStatus();
               });
}

grpc::Status WorkerGatewayService::AcquireRun(ServerContext* context,
                                              const xmod::v1::AcquireRunRequest* request,
                                              xmod::v1::AcquireRunResponse* response) {
  return Serve(
      "AcquireRun", Access::kWorker, *options_.credentials, context, metrics_,
      [&](const Principal& caller) -> absl::Status {
        if (absl::Status s = identity_.CheckWorker(caller, request->worker_id()); !s.ok()) {
          return s;
        }
        if (absl::Status s = CheckLimits(*request); !s.ok()) return s;
        xmod::v1::AcquireRunRequest bounded = *request;
        int64_t wait_ms = std::min(request->wait_ms(), options_.max_wait_ms);
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            context->deadline() - std::chrono::system_clock::now());
        // Answer a little before the caller's deadline so that an empty reply still
        // arrives.
        wait_ms = std::min<int64_t>(wait_ms, std::max<int64_t>(0, left.count() - 200));
        bounded.set_wait_ms(wait_ms);
        absl::StatusOr<std::optional<xmod::v1::Assignment>> a = scheduler_->Acquire(bounded);
        if (!a.ok()) return a.status();
        if (a->has_value()) *response->mutable_assignment() = std::move(**a);
        return absl::OkStatus();
      });
}

grpc::Status WorkerGatewayService::ReportMetrics(ServerContext* context,
                                                 const xmod::v1::ReportMetricsRequest* request,
                                                 xmod::v1::ReportMetricsResponse* response) {
  return Serve("ReportMetrics", Access::kWorker, *options_.credentials, context, metrics_,
               [&](const Principal& caller) -> absl::Status {
                 if (absl::Status s = identity_.CheckAttempt(caller, request->worker_id(),
                                                             request->run_id(), request->attempt());
                     !s.ok()) {
                   return s;
                 }
                 if (absl::Status s = CheckLimits(*request); !s.ok()) return s;
                 absl::StatusOr<xmod::v1::ReportMetricsResponse> r =
                     ingest_->ReportMetrics(*request);
                 if (!r.ok()) return r.status();
                 *response = *std::move(r);
                 return absl::OkStatus();
               });
}

grpc::Status WorkerGatewayService::ReportCheckpoint(
    ServerContext* context, const xmod::v1::ReportCheckpointRequest* request,
    xmod::v1::ReportCheckpointResponse*) {
  return Serve("ReportCheckpoint", Access::kWorker, *options_.credentials, context, metrics_,
               [&](const Principal& caller) {
                 if (absl::Status s = identity_.CheckAttempt(caller, request->worker_id(),
                                                             request->run_id(), request->attempt());
                     !s.ok()) {
                   return s;
                 }
                 if (absl::Status s = CheckLimits(*request); !s.ok()) return s;
                 return scheduler_->ReportCheckpoint(*request);
               });
}

grpc::Status WorkerGatewayService::FinishRun(ServerContext* context,
                                             const xmod::v1::FinishRunRequest* request,
                                             xmod::v1::FinishRunResponse*) {
  return Serve("FinishRun", Access::kWorker, *options_.credentials, context, metrics_,
               [&](const Principal& caller) {
                 if (absl::Status s = identity_.CheckAttempt(caller, request->worker_id(),
                                                             request->run_id(), request->attempt());
                     !s.ok()) {
                   return s;
                 }
                 return scheduler_->FinishRun(WithinLimits(*request));
               });
}

}  // namespace xmod
