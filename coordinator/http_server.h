// HttpServer: the web dashboard's static files and the small JSON API it reads
// (cpp-httplib, one listening thread plus httplib's worker pool):
//   GET /api/sweeps                                    ListSweepsResponse
//   GET /api/sweeps/{id}/runs                          ListRunsResponse
//   GET /api/runs/{id}/metrics?names=a,b&max_points=N  GetMetricsResponse
//   GET /api/sweeps/{id}/fit                           Fit, as GetFit (404 until the sweep
//                                                      has a successful fit)
//   GET /api/sweeps/{id}/recommend?flops=C&seq_len=L&backbone=B[&max_total_params=N]
//       [&ks=1,2,4][&as=1,2]                           RecommendResponse (404 without a fit)
// JSON is protobuf's mapping (MessageToJsonString). With a token, /api/ needs
// "Authorization: Bearer <token>" or ?token=<token>. Thread-safe.
#ifndef XMOD_COORDINATOR_HTTP_SERVER_H_
#define XMOD_COORDINATOR_HTTP_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "coordinator/store.h"

namespace httplib {
class Server;
}

namespace xmod {

struct HttpServerOptions {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 picks a free one
  std::string dashboard_dir;           // served at /; not served when empty or missing
  std::string token;
};

class HttpServer {
 public:
  // Binds and starts serving. `store` must outlive the server. UNAVAILABLE when the address
  // cannot be bound, INVALID_ARGUMENT when it is not host:port.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(Store* store,
                                                           const HttpServerOptions& options);
  ~HttpServer();
  int port() const { return port_; }
  void Stop();

 private:
  HttpServer() = default;
  void Route(Store* store, const HttpServerOptions& options);

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// Splits "host:port" (port may be 0). INVALID_ARGUMENT naming `flag` otherwise.
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address,
                                                          const std::string& flag);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_HTTP_SERVER_H_
