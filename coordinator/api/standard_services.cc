// See standard_services.h.
#include "coordinator/api/standard_services.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/security/server_credentials.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {
namespace {

// Whether one builder's server offers reflection. Linking gRPC's reflection library registers
// its plugin for every server of the process (a static initializer): this option takes it
// out of the builder's plugins and puts it back only when `enabled`.
class ReflectionOption : public grpc::ServerBuilderOption {
 public:
  explicit ReflectionOption(bool enabled) : enabled_(enabled) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    auto reflection = std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>();
    const std::string name = reflection->name();
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [&name](const auto& plugin) { return plugin->name() == name; }),
                   plugins->end());
    if (enabled_) plugins->push_back(std::move(reflection));
  }

 private:
  const bool enabled_;
};

// gRPC builds no server without a synchronous service, and its default health service is a
// callback one: a generated service base, every method UNIMPLEMENTED, stands in.
class Placeholder final : public v1::WorkerGateway::Service {};

// gRPC's switch is process-wide and not thread-safe: flip it once.
void EnableHealthService() {
  static std::once_flag once;
  std::call_once(once, [] { grpc::EnableDefaultHealthCheckService(true); });
}

}  // namespace

void AddStandardServices(grpc::ServerBuilder* builder, bool reflection) {
  EnableHealthService();
  builder->SetOption(std::make_unique<ReflectionOption>(reflection));
}

absl::StatusOr<std::unique_ptr<HealthListener>> HealthListener::Start(const std::string& address) {
  std::unique_ptr<HealthListener> listener(new HealthListener);
  listener->placeholder_ = std::make_unique<Placeholder>();
  grpc::ServerBuilder builder;
  AddStandardServices(&builder, /*reflection=*/false);
  builder.RegisterService(listener->placeholder_.get());
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &listener->port_);
  listener->server_ = builder.BuildAndStart();
  if (listener->server_ == nullptr || listener->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("--health_listen: cannot listen on ", address));
  }
  return listener;
}

void HealthListener::Shutdown() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
}

HealthListener::~HealthListener() { Shutdown(); }

void SetServing(grpc::Server* server, bool serving) {
  if (server == nullptr) return;
  if (grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService()) {
    health->SetServingStatus(serving);
  }
}

void MarkNotServing(grpc::Server* server) {
  if (server == nullptr) return;
  if (grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService()) {
    health->Shutdown();
  }
}

}  // namespace xmod
