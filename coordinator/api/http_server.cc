// See http_server.h.
#include "coordinator/api/http_server.h"

#include <httplib.h>

#include <filesystem>

#include "coordinator/api/http_actions.h"
#include "coordinator/api/http_auth.h"
#include "coordinator/api/http_events.h"
#include "coordinator/api/http_routes.h"
#include "coordinator/api/http_series.h"
#include "glog/logging.h"

namespace xmod {
namespace {

constexpr size_t kMaxRequestBodyBytes = 64 << 10;

enum class Method { kGet, kPost };

struct RouteEntry {
  Method method;
  const char* pattern;  // the whole path, a regular expression; groups are the handler's
  HttpHandler handler;
};

// The API's routes (http_server.h lists what each answers), matched in this order.
constexpr RouteEntry kRoutes[] = {
    {Method::kPost, "/api/login", PostLogin},
    {Method::kPost, "/api/logout", PostLogout},
    {Method::kGet, "/api/session", GetSession},
    {Method::kGet, "/api/sweeps", GetSweeps},
    {Method::kGet, R"(/api/sweeps/(\d+)/runs)", GetSweepRuns},
    {Method::kGet, R"(/api/sweeps/(\d+)/events)", GetSweepEvents},
    {Method::kGet, R"(/api/runs/(\d+)/metrics)", GetRunMetrics},
    {Method::kGet, R"(/api/sweeps/(\d+)/decisions)", GetSweepDecisions},
    {Method::kGet, R"(/api/sweeps/(\d+)/fit)", GetSweepFit},
    {Method::kGet, R"(/api/sweeps/(\d+)/recommend)", GetSweepRecommendation},
    {Method::kGet, R"(/api/sweeps/(\d+)/pilot)", GetSweepPilot},
    {Method::kGet, "/api/studies", GetStudies},
    {Method::kGet, R"(/api/studies/([A-Za-z0-9_.-]+))", GetStudyByName},
    {Method::kGet, R"(/api/studies/([A-Za-z0-9_.-]+)/fit)", GetStudyFit},
    {Method::kGet, R"(/api/sweeps/(\d+)/history)", GetSweepHistory},
    {Method::kGet, R"(/api/runs/(\d+)/history)", GetRunHistory},
    {Method::kPost, R"(/api/sweeps/(\d+)/cancel)", PostCancelSweep},
    {Method::kPost, R"(/api/sweeps/(\d+)/retry)", PostRetrySweep},
    {Method::kPost, R"(/api/runs/(\d+)/cancel)", PostCancelRun},
    {Method::kPost, R"(/api/runs/(\d+)/resume)", PostResumeRun},
    {Method::kGet, "/series.js", GetSeriesScript},
};

}  // namespace

HttpServer::HttpServer(Store* store, const HttpServerOptions& options)
    : sessions_(options.sessions, options.clock),
      credentials_(options.credentials),
      context_(std::make_unique<HttpContext>(
          HttpContext{store, options.feed, &event_streams_, &stopping_, credentials_.get(),
                      &sessions_, !options.tls_cert_file.empty(), options.actions})) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(Store* store,
                                                              const HttpServerOptions& options) {
  HttpListenerOptions listen;
  listen.listen = options.listen;
  listen.tls_cert_file = options.tls_cert_file;
  listen.tls_key_file = options.tls_key_file;
  absl::StatusOr<std::unique_ptr<HttpListener>> listener = HttpListener::Bind(listen);
  if (!listener.ok()) return listener.status();
  std::unique_ptr<HttpServer> server(new HttpServer(store, options));
  server->listener_ = *std::move(listener);
  server->server_ = &server->listener_->server();
  server->server_->set_payload_max_length(kMaxRequestBodyBytes);  // only logins post bodies
  // Each open event stream holds a thread: room for all of them besides the usual pool.
  server->server_->new_task_queue = [] {
    return new httplib::ThreadPool(CPPHTTPLIB_THREAD_POOL_COUNT + kMaxEventStreams);
  };
  server->Route(options.dashboard_dir);
  server->listener_->Serve();
  return server;
}

void HttpServer::Route(const std::string& dashboard_dir) {
  const HttpContext* context = context_.get();
  server_->set_pre_routing_handler(
      [context](const httplib::Request& request, httplib::Response& response) {
        return CheckApiCaller(*context, request, response);
      });
  for (const RouteEntry& route : kRoutes) {
    httplib::Server::Handler handler = [context, serve = route.handler](
                                           const httplib::Request& request,
                                           httplib::Response& response) {
      serve(*context, request, response);
    };
    if (route.method == Method::kPost) {
      server_->Post(route.pattern, std::move(handler));
    } else {
      server_->Get(route.pattern, std::move(handler));
    }
  }
  if (!dashboard_dir.empty() && std::filesystem::is_directory(dashboard_dir)) {
    server_->set_mount_point("/", dashboard_dir);
  } else if (!dashboard_dir.empty()) {
    LOG(WARNING) << "dashboard directory " << dashboard_dir
                 << " does not exist; serving the JSON API only";
  }
}

void HttpServer::Stop() {
  stopping_ = true;  // event streams end within kEventWaitSlice
  listener_->Stop();
}

HttpServer::~HttpServer() { Stop(); }

}  // namespace xmod
