// The dashboard's changes and history (docs/security.md, "The dashboard"):
//   POST /api/sweeps/{id}/cancel   Sweep, as CancelSweep
//   POST /api/sweeps/{id}/retry    RetryFailedResponse, as RetryFailed
//   POST /api/runs/{id}/cancel     Run, as CancelRun
//   POST /api/runs/{id}/resume     Run, as ResumeRun
//   GET  /api/sweeps/{id}/history?limit=&before_id=   ListEventsResponse: the sweep's and its
//                                                     runs' events, newest first
//   GET  /api/runs/{id}/history?limit=&before_id=     ListEventsResponse: the run's events
// A change acts through user_actions.h, as the gRPC method does, so it is refused the same
// way (a user or admin credential's bearer token or session; someone else's work is 403
// naming its owner, and nothing changes). A change without a bearer token must carry the
// header "X-Xmod-Action: 1", which the dashboard's script sends and a cross-site form or
// script cannot (browsers ask before sending a custom header elsewhere, and this server never
// allows it), so another page the user visits cannot act with the user's session. Thread-safe.
#ifndef XMOD_COORDINATOR_API_HTTP_ACTIONS_H_
#define XMOD_COORDINATOR_API_HTTP_ACTIONS_H_

#include <httplib.h>

#include "coordinator/api/http_routes.h"

namespace xmod {

// The header a session-authenticated change must carry.
inline constexpr char kActionHeader[] = "X-Xmod-Action";

void PostCancelSweep(const HttpContext& context, const httplib::Request& request,
                     httplib::Response& response);
void PostRetrySweep(const HttpContext& context, const httplib::Request& request,
                    httplib::Response& response);
void PostCancelRun(const HttpContext& context, const httplib::Request& request,
                   httplib::Response& response);
void PostResumeRun(const HttpContext& context, const httplib::Request& request,
                   httplib::Response& response);
void GetSweepHistory(const HttpContext& context, const httplib::Request& request,
                     httplib::Response& response);
void GetRunHistory(const HttpContext& context, const httplib::Request& request,
                   httplib::Response& response);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_HTTP_ACTIONS_H_
