// See metrics_endpoint.h.
#include "common/metrics_endpoint.h"

#include <httplib.h>
#include <openssl/crypto.h>

#include <CLI/CLI.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/credentials.h"
#include "common/files.h"
#include "prometheus/text_serializer.h"

namespace xmod {
namespace {

constexpr char kBearer[] = "Bearer ";

// SHA-256 (hex) of the expected token, or "" when no token is asked for.
absl::StatusOr<std::string> TokenDigest(const std::string& token_file) {
  if (token_file.empty()) return std::string();
  absl::StatusOr<std::string> token = ReadToken(token_file, nullptr);
  if (!token.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_token_file: ", token.status().message()));
  }
  if (token->size() < kMinMetricsTokenLength) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics_token_file: the token in ",
                                                   token_file, " is shorter than ",
                                                   kMinMetricsTokenLength, " characters"));
  }
  return Sha256Hex(*token);
}

// Whether the request carries "Authorization: Bearer <token>" whose digest is `digest`;
// digests of equal length are compared in constant time.
bool HasToken(const httplib::Request& req, const std::string& digest) {
  const std::string header = req.get_header_value("Authorization");
  if (!absl::StartsWithIgnoreCase(header, kBearer)) return false;
  const std::string presented = Sha256Hex(header.substr(sizeof(kBearer) - 1));
  return CRYPTO_memcmp(presented.data(), digest.data(), digest.size()) == 0;
}

}  // namespace

void AddMetricsAccessFlags(CLI::App& app, MetricsAccess* access) {
  app.add_option("--metrics_tls_cert", access->tls_cert_file,
                 "PEM certificate (chain): /metrics over HTTPS only (Prometheus: scheme: https)");
  app.add_option("--metrics_tls_key", access->tls_key_file,
                 "PEM private key of --metrics_tls_cert");
  app.add_option("--metrics_token_file", access->token_file,
                 "file holding the bearer token (at least 16 characters) every scrape must "
                 "send (Prometheus: authorization: {credentials_file}); empty: none asked for");
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listen, const MetricsAccess& access,
    std::shared_ptr<prometheus::Collectable> collectable) {
  absl::StatusOr<std::string> digest = TokenDigest(access.token_file);
  if (!digest.ok()) return digest.status();
  HttpListenerOptions options;
  options.listen = listen;
  options.tls_cert_file = access.tls_cert_file;
  options.tls_key_file = access.tls_key_file;
  options.listen_flag = "--metrics_listen";
  options.cert_flag = "--metrics_tls_cert";
  options.key_flag = "--metrics_tls_key";
  absl::StatusOr<std::unique_ptr<HttpListener>> listener = HttpListener::Bind(options);
  if (!listener.ok()) return listener.status();
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint);
  endpoint->listener_ = *std::move(listener);
  endpoint->listener_->server().Get(
      "/metrics",
      [collectable, digest = *digest](const httplib::Request& req, httplib::Response& res) {
        if (!digest.empty() && !HasToken(req, digest)) {
          res.status = 401;
          res.set_header("WWW-Authenticate", "Bearer realm=\"xmod metrics\"");
          res.set_content("a valid bearer token is required\n", "text/plain");
          return;
        }
        res.set_content(prometheus::TextSerializer().Serialize(collectable->Collect()),
                        "text/plain; version=0.0.4; charset=utf-8");
      });
  endpoint->listener_->Serve();
  return endpoint;
}

}  // namespace xmod
