// CoordinatorClient (see client.h).
#include "cli/client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/grpc_status.h"
#include "common/status_origin.h"

namespace xmod::cli {

absl::StatusOr<CoordinatorClient> CoordinatorClient::Connect(const ClientOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = NewChannel(options.addr, options.tls);
  if (!channel.ok()) return channel.status();
  return CoordinatorClient(options, *std::move(channel));
}

CoordinatorClient::CoordinatorClient(const ClientOptions& options,
                                     std::shared_ptr<grpc::Channel> channel)
    : options_(options),
      channel_(std::move(channel)),
      stub_(xmod::v1::Coordinator::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> CoordinatorClient::NewContext(bool with_deadline) const {
  auto context = std::make_unique<grpc::ClientContext>();
  AttachBearerToken(options_.token, context.get());
  if (with_deadline && options_.timeout_s > 0) {
    context->set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000)));
  }
  return context;
}

namespace {

// Whether the coordinator itself produced the failed call's status.
bool AnsweredByCoordinator(const grpc::ClientContext* context) {
  if (context == nullptr) return false;
  const auto& trailers = context->GetServerTrailingMetadata();
  auto origin = trailers.find(kStatusOriginKey);
  return origin != trailers.end() && origin->second == kStatusOriginCoordinator;
}

}  // namespace

absl::Status CoordinatorClient::Error(const grpc::Status& status,
                                      const grpc::ClientContext* context) const {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      if (AnsweredByCoordinator(context)) return FromGrpcStatus(status);
      return absl::UnavailableError(absl::StrCat("cannot reach the coordinator at ", options_.addr,
                                                 ": ", status.error_message()));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(absl::StrCat("the coordinator at ", options_.addr,
                                                      " did not answer within ", options_.timeout_s,
                                                      " s (--timeout)"));
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::UnauthenticatedError(absl::StrCat(
          "the coordinator at ", options_.addr,
          " refused the token (--token_file or XMOD_TOKEN): ", status.error_message()));
    default:
      return FromGrpcStatus(status);
  }
}

}  // namespace xmod::cli
