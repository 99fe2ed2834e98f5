// CoordinatorClient (see client.h).
#include "cli/client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/grpc_status.h"

namespace xmod::cli {

CoordinatorClient::CoordinatorClient(const ClientOptions& options) : options_(options) {
  grpc::ChannelArguments args;
  // Query results and metric series can be large.
  args.SetMaxReceiveMessageSize(256 << 20);
  channel_ = grpc::CreateCustomChannel(options_.addr, grpc::InsecureChannelCredentials(), args);
  stub_ = xmod::v1::Coordinator::NewStub(channel_);
}

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

absl::Status CoordinatorClient::Error(const grpc::Status& status) const {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(absl::StrCat("cannot reach the coordinator at ", options_.addr,
                                                 ": ", status.error_message()));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(absl::StrCat("the coordinator at ", options_.addr,
                                                      " did not answer within ", options_.timeout_s,
                                                      " s (--timeout)"));
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::UnauthenticatedError(
          absl::StrCat("the coordinator at ", options_.addr,
                       " refused the token (--token or XMOD_TOKEN): ", status.error_message()));
    default:
      return FromGrpcStatus(status);
  }
}

}  // namespace xmod::cli
