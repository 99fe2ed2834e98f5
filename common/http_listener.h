// HttpListener: a cpp-httplib server bound to one host:port — HTTPS only when given a PEM
// certificate and key, else plaintext — that serves on a thread of its own once its routes
// are set. The coordinator's dashboard API (coordinator/api/http_server.h) and the /metrics
// endpoint of both daemons (common/metrics_endpoint.h) are built on it.
//
// Thread-safety: set routes, then Serve() once; Stop() from any thread.
#ifndef XMOD_COMMON_HTTP_LISTENER_H_
#define XMOD_COMMON_HTTP_LISTENER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace xmod {

struct HttpListenerOptions {
  std::string listen;         // host:port; port 0 picks a free one
  std::string tls_cert_file;  // PEM; with tls_key_file the listener speaks HTTPS only
  std::string tls_key_file;
  // The flags these came from, for error messages.
  std::string listen_flag = "--http_listen";
  std::string cert_flag = "--tls_cert";
  std::string key_flag = "--tls_key";
};

class HttpListener {
 public:
  // Binds the address; serves nothing until Serve(). INVALID_ARGUMENT naming the flag when
  // the address is not host:port, when only one of certificate and key is given or they
  // cannot be loaded; UNAVAILABLE naming it when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Bind(const HttpListenerOptions& options);
  ~HttpListener();

  httplib::Server& server() { return *server_; }
  int port() const { return port_; }
  // Starts answering requests with the routes set on server().
  void Serve();
  // Stops answering and joins the serving thread. Idempotent.
  void Stop();

 private:
  HttpListener() = default;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> loop_ended_{false};  // the serving thread's loop has returned
  int port_ = 0;
};

// Splits "host:port" (port may be 0; an empty host is 0.0.0.0, [v6] loses its brackets).
// INVALID_ARGUMENT naming `flag` otherwise.
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address,
                                                          const std::string& flag);

}  // namespace xmod

#endif  // XMOD_COMMON_HTTP_LISTENER_H_
