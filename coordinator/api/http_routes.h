// The handlers of the dashboard's JSON API (the routes http_server.h lists): each parses its
// path and query parameters into the Coordinator request, answers through the same read as
// the gRPC method (user_queries.h, fit_queries.h, pilot_queries.h) and prints the response
// message through common/proto_json.h. Errors are {"error": message} (HttpError, http_api.proto)
// with the HTTP status of their code. The caller's scope is checked before any of them runs
// (http_auth.h). Thread-safe.
#ifndef XMOD_COORDINATOR_API_HTTP_ROUTES_H_
#define XMOD_COORDINATOR_API_HTTP_ROUTES_H_

#include <httplib.h>

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/credentials.h"
#include "coordinator/api/http_sessions.h"
#include "coordinator/store/change_feed.h"
#include "coordinator/store/store.h"
#include "google/protobuf/message.h"

namespace xmod {

class UserActions;

// What every handler may use; owned by the HttpServer, which outlives its handlers.
struct HttpContext {
  Store* store = nullptr;
  ChangeFeed* feed = nullptr;                   // what the events stream follows
  std::atomic<int>* event_streams = nullptr;    // open event streams (http_events.h)
  const std::atomic<bool>* stopping = nullptr;  // the server is stopping: streams end
  const CredentialSet* credentials = nullptr;   // empty = everyone may read
  HttpSessions* sessions = nullptr;
  bool secure = false;             // served over HTTPS: the session cookie is Secure
  UserActions* actions = nullptr;  // the POST routes' changes (http_actions.h); null: none
};

using HttpHandler = void (*)(const HttpContext& context, const httplib::Request& request,
                             httplib::Response& response);

// `message` as the response body (common/proto_json.h, one line); 500 when it cannot print.
void SendJson(const google::protobuf::Message& message, httplib::Response& response);
// {"error": status.message()} with the HTTP status of status.code(): 404 for NOT_FOUND and
// FAILED_PRECONDITION, 400, 401, 403, 429, 503 for UNAVAILABLE, else 500.
void SendError(const absl::Status& status, httplib::Response& response);

// The answer of a read or a change: its message, or its error.
template <typename T>
void SendAnswer(const absl::StatusOr<T>& answer, httplib::Response& response) {
  answer.ok() ? SendJson(*answer, response) : SendError(answer.status(), response);
}

// The {id} of a route's path (its first group); 0 when it is out of range.
int64_t PathId(const httplib::Request& request);

// GET /api/sweeps, /api/sweeps/{id}/runs, /api/sweeps/{id}/decisions.
void GetSweeps(const HttpContext& context, const httplib::Request& request,
               httplib::Response& response);
void GetSweepRuns(const HttpContext& context, const httplib::Request& request,
                  httplib::Response& response);
void GetSweepDecisions(const HttpContext& context, const httplib::Request& request,
                       httplib::Response& response);
// GET /api/runs/{id}/metrics?names=a,b&max_points=N.
void GetRunMetrics(const HttpContext& context, const httplib::Request& request,
                   httplib::Response& response);
// GET /api/sweeps/{id}/fit, /api/sweeps/{id}/recommend?flops=C&seq_len=L&backbone=B...
void GetSweepFit(const HttpContext& context, const httplib::Request& request,
                 httplib::Response& response);
void GetSweepRecommendation(const HttpContext& context, const httplib::Request& request,
                            httplib::Response& response);
// GET /api/sweeps/{id}/pilot: the B.3 pilot selection (pilot_queries.h).
void GetSweepPilot(const HttpContext& context, const httplib::Request& request,
                   httplib::Response& response);
// GET /api/studies, /api/studies/{name}, /api/studies/{name}/fit.
void GetStudies(const HttpContext& context, const httplib::Request& request,
                httplib::Response& response);
void GetStudyByName(const HttpContext& context, const httplib::Request& request,
                    httplib::Response& response);
void GetStudyFit(const HttpContext& context, const httplib::Request& request,
                 httplib::Response& response);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_HTTP_ROUTES_H_
