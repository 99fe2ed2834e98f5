// See http_listener.h.
#include "common/http_listener.h"

#include <httplib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace xmod {

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address,
                                                          const std::string& flag) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": \"", address, "\" is not host:port (port 0 picks a free one)"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host.empty() ? std::string("0.0.0.0") : host, port);
}

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Bind(
    const HttpListenerOptions& options) {
  absl::StatusOr<std::pair<std::string, int>> address =
      SplitHostPort(options.listen, options.listen_flag);
  if (!address.ok()) return address.status();
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.cert_flag, " and ", options.key_flag, " must be given together"));
  }
  std::unique_ptr<HttpListener> listener(new HttpListener);
  if (!options.tls_cert_file.empty()) {
    auto https = std::make_unique<httplib::SSLServer>(options.tls_cert_file.c_str(),
                                                      options.tls_key_file.c_str());
    if (!https->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(options.cert_flag, "/", options.key_flag,
                                                     ": cannot load ", options.tls_cert_file,
                                                     " and ", options.tls_key_file, " for HTTPS"));
    }
    listener->server_ = std::move(https);
  } else {
    listener->server_ = std::make_unique<httplib::Server>();
  }
  const auto& [host, port] = *address;
  httplib::Server& server = *listener->server_;
  listener->port_ =
      port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (listener->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat(options.listen_flag, ": cannot listen on ", options.listen));
  }
  return listener;
}

void HttpListener::Serve() {
  httplib::Server* server = server_.get();
  std::atomic<bool>* loop_ended = &loop_ended_;
  thread_ = std::thread([server, loop_ended] {
    server->listen_after_bind();
    *loop_ended = true;
  });
  // httplib's stop() does nothing until the loop runs: wait for it, so Stop() cannot miss it.
  while (!server->is_running() && !loop_ended_) std::this_thread::yield();
}

void HttpListener::Stop() {
  if (server_ == nullptr) return;  // Bind failed
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpListener::~HttpListener() { Stop(); }

}  // namespace xmod
