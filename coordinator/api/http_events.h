// GET /api/sweeps/{id}/events: the dashboard's live updates as server-sent events, fed by the
// coordinator's change feed (coordinator/store/change_feed.h) instead of polling the runs
// document. The stream opens with
//   event: hello   data: {"sweep": Sweep}               (the page re-reads its current page)
// and then sends, at most one event each kEventMinInterval, the runs that changed since the
// event before:
//   event: runs    data: WatchSweepEvent {"sweep", "runs": the changed runs}
//   event: reload  data: WatchSweepEvent {"sweep"}   more than kMaxEventRuns changed: re-read
//                                                    the page instead
// and a comment line (": idle") after kEventHeartbeat without changes, so that a closed tab is
// noticed. Bounds: kMaxEventStreams open streams per server (429 past them), each at most
// kEventStreamLifetime long (EventSource reconnects by itself, after `retry`). Callers are
// checked as for every /api/ route (http_auth.h): a session cookie or a bearer token.
// Thread-safe.
#ifndef XMOD_COORDINATOR_API_HTTP_EVENTS_H_
#define XMOD_COORDINATOR_API_HTTP_EVENTS_H_

#include <httplib.h>

#include "absl/time/time.h"
#include "coordinator/api/http_routes.h"

namespace xmod {

inline constexpr int kMaxEventStreams = 16;
inline constexpr int kMaxEventRuns = 200;
inline constexpr absl::Duration kEventMinInterval = absl::Milliseconds(500);
inline constexpr absl::Duration kEventHeartbeat = absl::Seconds(5);
inline constexpr absl::Duration kEventStreamLifetime = absl::Minutes(10);
// How often a waiting stream checks that its client and the server are still there.
inline constexpr absl::Duration kEventWaitSlice = absl::Seconds(1);

void GetSweepEvents(const HttpContext& context, const httplib::Request& request,
                    httplib::Response& response);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_HTTP_EVENTS_H_
