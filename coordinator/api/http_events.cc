// The dashboard's server-sent events. See http_events.h.
#include "coordinator/api/http_events.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/proto_json.h"
#include "coordinator/api/user_queries.h"
#include "coordinator/store/change_feed.h"

namespace xmod {
namespace {

// One open stream: its sweep, the feed version it has sent up to, and when it ends.
struct EventStream {
  const HttpContext* context;
  int64_t sweep_id;
  int64_t since;
  absl::Time ends;
  bool greeted = false;
};

// "event: NAME\ndata: JSON\n\n" of `event`; false when the client has gone.
bool SendEvent(httplib::DataSink& sink, const char* name, const xmod::v1::WatchSweepEvent& event) {
  absl::StatusOr<std::string> json = ProtoJson(event, JsonLayout::kLine);
  if (!json.ok()) return false;
  const std::string text = absl::StrCat("event: ", name, "\ndata: ", *json, "\n\n");
  return sink.write(text.data(), text.size());
}

// Sends the next event of `stream` (blocking until there is one, or a heartbeat is due);
// false ends the stream.
bool SendNext(EventStream& stream, httplib::DataSink& sink) {
  if (!sink.is_writable() || absl::Now() >= stream.ends) return false;
  Store& store = *stream.context->store;
  if (!stream.greeted) {
    stream.greeted = true;
    const std::vector<int64_t> none;
    absl::StatusOr<xmod::v1::WatchSweepEvent> hello = ReadSweepEvent(store, stream.sweep_id, &none);
    static constexpr char kRetry[] = "retry: 2000\n\n";
    return hello.ok() && sink.write(kRetry, sizeof(kRetry) - 1) && SendEvent(sink, "hello", *hello);
  }
  ChangeFeed& feed = *stream.context->feed;
  ChangeFeed::Changes changes;
  // One-second waits, so that a closing server or a closed tab ends the stream soon.
  for (absl::Duration idle; changes.run_ids.empty(); idle += kEventWaitSlice) {
    if (stream.context->stopping->load() || !sink.is_writable()) return false;
    if (idle >= kEventHeartbeat) {
      static constexpr char kIdle[] = ": idle\n\n";
      return sink.write(kIdle, sizeof(kIdle) - 1);
    }
    changes = feed.WaitForChanges(stream.sweep_id, stream.since, kEventWaitSlice);
  }
  // Coalesce: whatever changes within the interval goes into this one event.
  absl::SleepFor(kEventMinInterval);
  changes = feed.WaitForChanges(stream.sweep_id, stream.since, absl::ZeroDuration());
  stream.since = changes.version;
  std::vector<int64_t> run_ids;
  for (int64_t id : changes.run_ids) {
    if (id > 0) run_ids.push_back(id);
  }
  const bool reload = run_ids.size() > kMaxEventRuns;
  if (reload) run_ids.clear();
  absl::StatusOr<xmod::v1::WatchSweepEvent> event =
      ReadSweepEvent(store, stream.sweep_id, &run_ids);
  return event.ok() && SendEvent(sink, reload ? "reload" : "runs", *event);
}

}  // namespace

void GetSweepEvents(const HttpContext& context, const httplib::Request& request,
                    httplib::Response& response) {
  int64_t sweep_id = 0;
  if (!absl::SimpleAtoi(request.matches[1].str(), &sweep_id)) sweep_id = 0;
  if (context.feed == nullptr) {
    SendError(absl::NotFoundError("events: this server has no change feed"), response);
    return;
  }
  // NOT_FOUND before any stream opens.
  const std::vector<int64_t> none;
  absl::StatusOr<xmod::v1::WatchSweepEvent> sweep = ReadSweepEvent(*context.store, sweep_id, &none);
  if (!sweep.ok()) {
    SendError(sweep.status(), response);
    return;
  }
  if (context.event_streams->fetch_add(1) >= kMaxEventStreams) {
    context.event_streams->fetch_sub(1);
    SendError(absl::ResourceExhaustedError(absl::StrCat("events: at most ", kMaxEventStreams,
                                                        " event streams may be open at once")),
              response);
    return;
  }
  auto stream = std::make_shared<EventStream>(
      EventStream{&context, sweep_id, context.feed->Version(), absl::Now() + kEventStreamLifetime});
  response.set_header("Cache-Control", "no-store");
  response.set_chunked_content_provider(
      "text/event-stream",
      [stream](size_t, httplib::DataSink& sink) {
        if (SendNext(*stream, sink)) return true;
        sink.done();
        return true;
      },
      [counter = context.event_streams](bool) { counter->fetch_sub(1); });
}

}  // namespace xmod
