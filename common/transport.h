// Transport for the coordinator's gRPC API: TLS credentials from PEM files and the message-size
// limits, for the server (xmod-coordinator) and its clients (xmodctl, xmod-worker, tests), so
// both ends agree on them. Free functions; thread-safe.
#ifndef XMOD_COMMON_TRANSPORT_H_
#define XMOD_COMMON_TRANSPORT_H_

#include <grpcpp/channel.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace xmod {

// Largest request a server accepts (a sweep spec, a metric batch) and largest response
// (Query and metric series are capped below it by the coordinator).
inline constexpr int kMaxRequestBytes = 16 << 20;
inline constexpr int kMaxResponseBytes = 64 << 20;

// Server TLS. All empty: plaintext. cert_file and key_file (PEM) come together; with
// client_ca_file every client must present a certificate signed by that CA (mTLS).
struct ServerTlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
};

// Server credentials for `tls`. INVALID_ARGUMENT naming the flag (--tls_cert, --tls_key,
// --tls_client_ca) when a file is missing, unreadable, or a client CA comes without a cert.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> NewServerCredentials(
    const ServerTlsFiles& tls);

// Applies the message-size limits to a server.
void SetServerMessageLimits(grpc::ServerBuilder* builder);

// Client TLS. TLS is on when `enabled` or any file is given; ca_file (PEM) replaces the
// system roots; cert_file and key_file (together) are the client certificate for mTLS.
struct ClientTlsFiles {
  bool enabled = false;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  bool on() const { return enabled || !ca_file.empty() || !cert_file.empty(); }
};

// A channel to `target` (host:port) with the message-size limits. INVALID_ARGUMENT naming the
// flag (--tls_ca, --tls_cert, --tls_key) when a file cannot be read or cert and key are not
// given together.
absl::StatusOr<std::shared_ptr<grpc::Channel>> NewChannel(const std::string& target,
                                                          const ClientTlsFiles& tls);

}  // namespace xmod

#endif  // XMOD_COMMON_TRANSPORT_H_
