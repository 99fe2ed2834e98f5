// CoordinatorClient: xmodctl's connection to xmod-coordinator's user API. Owns the channel
// (TLS when configured) and stub, attaches the bearer token and the deadline to every call,
// and turns failures into one-line absl::Status messages that name the address tried.
// Thread-safe after construction (gRPC stubs are).
#ifndef XMOD_CLI_CLIENT_H_
#define XMOD_CLI_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/transport.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod::cli {

struct ClientOptions {
  std::string addr;       // host:port of the coordinator
  std::string token;      // bearer token; empty = none
  ClientTlsFiles tls;     // TLS (and client certificate); off = plaintext
  double timeout_s = 30;  // deadline of unary calls; <= 0 = none
};

class CoordinatorClient {
 public:
  // A client over a channel to options.addr (common/transport.h); INVALID_ARGUMENT naming the
  // flag when a TLS file cannot be read.
  static absl::StatusOr<CoordinatorClient> Connect(const ClientOptions& options);

  const ClientOptions& options() const { return options_; }
  xmod::v1::Coordinator::Stub& stub() { return *stub_; }

  // A context with the token attached and, when `with_deadline`, the unary deadline.
  std::unique_ptr<grpc::ClientContext> NewContext(bool with_deadline = true) const;

  // A failed call as a status: an UNAVAILABLE that the coordinator did not answer itself
  // (`context`'s trailing metadata lacks the status origin, common/status_origin.h; no
  // context: not known) says "cannot reach the coordinator at ADDR", DEADLINE_EXCEEDED says
  // which address timed out; other codes, and an UNAVAILABLE the coordinator answered (its
  // database cannot be written for now), keep the server's message.
  absl::Status Error(const grpc::Status& status,
                     const grpc::ClientContext* context = nullptr) const;

  // Unary call helper: Call(&Stub::ListSweeps, request) -> response or Error(status).
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (xmod::v1::Coordinator::Stub::*method)(
                                    grpc::ClientContext*, const Request&, Response*),
                                const Request& request) {
    auto context = NewContext();
    Response response;
    grpc::Status status = ((*stub_).*method)(context.get(), request, &response);
    if (!status.ok()) return Error(status, context.get());
    return response;
  }

 private:
  CoordinatorClient(const ClientOptions& options, std::shared_ptr<grpc::Channel> channel);

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<xmod::v1::Coordinator::Stub> stub_;
};

}  // namespace xmod::cli

#endif  // XMOD_CLI_CLIENT_H_
