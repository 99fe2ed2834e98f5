// MetricsEndpoint: a daemon's Prometheus endpoint, GET /metrics in the text exposition format
// (version 0.0.4), serialized from its registry by prometheus-cpp's TextSerializer on each
// scrape. Optionally HTTPS (a PEM certificate and key) and behind a bearer token read from a
// file: what Prometheus's scrape config calls `scheme: https`, `tls_config: {ca_file}` and
// `authorization: {credentials_file}`. A scrape without "Authorization: Bearer <token>", or
// with another token, gets 401; the token is compared by its SHA-256 in constant time.
// xmod-coordinator and xmod-worker serve it with the same flags (docs/security.md).
//
// Thread-safe: scrapes are served on the listener's threads; Stop() from any thread.
#ifndef XMOD_COMMON_METRICS_ENDPOINT_H_
#define XMOD_COMMON_METRICS_ENDPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http_listener.h"
#include "prometheus/collectable.h"

namespace CLI {
class App;
}

namespace xmod {

// Shortest bearer token accepted in --metrics_token_file (as for credentials).
inline constexpr size_t kMinMetricsTokenLength = 16;

// Who may scrape, and over what. All empty: plaintext, no token.
struct MetricsAccess {
  std::string tls_cert_file;  // --metrics_tls_cert (PEM); with the key: HTTPS only
  std::string tls_key_file;   // --metrics_tls_key
  std::string token_file;     // --metrics_token_file; empty: no token asked for
};

// Adds --metrics_tls_cert, --metrics_tls_key and --metrics_token_file to a daemon's flags.
void AddMetricsAccessFlags(CLI::App& app, MetricsAccess* access);

class MetricsEndpoint {
 public:
  // Binds `listen` (--metrics_listen host:port; port 0 picks a free one) and serves
  // `collectable`. INVALID_ARGUMENT naming the flag when the address is not
  // host:port, the certificate or key cannot be loaded, or the token file cannot be read, is
  // empty or holds a token shorter than kMinMetricsTokenLength; UNAVAILABLE when the address
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& listen, const MetricsAccess& access,
      std::shared_ptr<prometheus::Collectable> collectable);

  int port() const { return listener_->port(); }
  void Stop() { listener_->Stop(); }

 private:
  MetricsEndpoint() = default;

  std::unique_ptr<HttpListener> listener_;
};

}  // namespace xmod

#endif  // XMOD_COMMON_METRICS_ENDPOINT_H_
