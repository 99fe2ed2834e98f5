// HttpServer: the web dashboard's static files and the small JSON API it reads
// (cpp-httplib, one listening thread plus httplib's worker pool):
//   GET /api/sweeps                                    ListSweepsResponse
//   GET /api/sweeps/{id}/runs?state=&arch=&k=&a=&seq_len=&backbone=&label=&name=&sort=
//       &order=desc&page_size=&page_token=&group=replicates
//                                                      ListRunsResponse (one page; http_routes.cc)
//   GET /api/sweeps/{id}/events                        text/event-stream of run changes
//                                                      (http_events.h)
//   GET /api/runs/{id}/metrics?names=a,b&max_points=N  GetMetricsResponse
//   GET /api/sweeps/{id}/fit                           Fit, as GetFit (404 until the sweep
//                                                      has a successful fit)
//   GET /api/sweeps/{id}/recommend?flops=C&seq_len=L&backbone=B[&max_total_params=N]
//       [&ks=1,2,4][&as=1,2]                           RecommendResponse (404 without a fit)
//   GET /api/sweeps/{id}/decisions                     ListDecisionsResponse (the newest 100)
//   GET /api/sweeps/{id}/pilot                         SelectPilotResponse, as SelectPilot
//   GET /api/studies                                   ListStudiesResponse
//   GET /api/studies/{name}                            Study
//   GET /api/studies/{name}/fit                        Fit, as GetFit with study
//   GET /api/sweeps/{id}/history, /api/runs/{id}/history?limit=&before_id=
//                                                      ListEventsResponse (http_actions.h)
//   POST /api/sweeps/{id}/cancel, /api/sweeps/{id}/retry, /api/runs/{id}/cancel,
//        /api/runs/{id}/resume                         the changes, as the gRPC calls make them
//                                                      (http_actions.h: ownership, the
//                                                      X-Xmod-Action header)
//   GET /api/session                                   {"authenticated","required","name","scope"}
//   POST /api/login   (body: the token, text/plain)    sets the session cookie (http_sessions.h;
//                                                      429 past a sign-in limit)
//   POST /api/logout                                   ends the session
//   GET /series.js                                     the metric series' names for the
//                                                      dashboard (http_series.h; no sign-in)
// The handlers are http_routes.h's and http_auth.h's; each read answers through the same
// function as its gRPC method (user_queries.h, fit_queries.h). Every body is JSON in the
// project's one API shape (common/proto_json.h: proto field names, defaults printed), the
// same document xmodctl -o json prints for the message; the sign-in and error documents are
// http_api.proto's. With credentials, the other /api/ routes need a user, admin or read
// credential (the changes a user or admin one):
// "Authorization: Bearer <token>" or the session cookie of a login (401 without, 403 for a
// worker credential); a token in the URL is never accepted. With a certificate and key the
// server speaks HTTPS only (and the cookie is Secure).
// Query parameters are held to the gRPC calls' caps (request_limits.h): past one, 400 with
// the same message naming the field ("max_points: 200000 exceeds the limit 100000").
// Thread-safe.
#ifndef XMOD_COORDINATOR_API_HTTP_SERVER_H_
#define XMOD_COORDINATOR_API_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/credentials.h"
#include "common/http_listener.h"
#include "coordinator/api/http_sessions.h"
#include "coordinator/store/change_feed.h"
#include "coordinator/store/store.h"

namespace httplib {
class Server;
}

namespace xmod {

struct HttpContext;
class UserActions;

struct HttpServerOptions {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 picks a free one
  std::string dashboard_dir;           // served at /; not served when empty or missing
  ChangeFeed* feed = nullptr;          // the events stream's source; must outlive the server
  // Who may read; empty = everyone. Never null.
  std::shared_ptr<const CredentialSet> credentials = std::make_shared<CredentialSet>();
  std::string tls_cert_file;  // PEM; with tls_key_file: HTTPS
  std::string tls_key_file;
  SessionLimits sessions;          // dashboard sign-ins (http_sessions.h)
  Clock* clock = Clock::Real();    // session lifetimes and sign-in rates; never null
  UserActions* actions = nullptr;  // the POST routes' changes; null: they answer 503
};

class HttpServer {
 public:
  // Binds and starts serving. `store` must outlive the server. UNAVAILABLE when the address
  // cannot be bound, INVALID_ARGUMENT when it is not host:port or the certificate or key
  // cannot be loaded.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(Store* store,
                                                           const HttpServerOptions& options);
  ~HttpServer();
  int port() const { return listener_->port(); }
  void Stop();

 private:
  HttpServer(Store* store, const HttpServerOptions& options);
  // Installs the caller check, the routes (http_routes.h, http_auth.h) and the dashboard.
  void Route(const std::string& dashboard_dir);

  HttpSessions sessions_;
  std::atomic<int> event_streams_{0};
  std::atomic<bool> stopping_{false};
  std::shared_ptr<const CredentialSet> credentials_;  // never null
  std::unique_ptr<HttpContext> context_;              // what the handlers use
  std::unique_ptr<HttpListener> listener_;
  httplib::Server* server_ = nullptr;  // listener_'s
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_HTTP_SERVER_H_
