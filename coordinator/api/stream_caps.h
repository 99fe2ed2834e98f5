// StreamCaps: how many long-lived calls of one kind (WatchSweep streams, ProposeRuns fits) are
// open, per credential and in all, so that no caller — nor all of them together — can hold
// every server thread or core. Open() takes a place or refuses at once with
// RESOURCE_EXHAUSTED naming the limit (nothing queues); the place is freed when the returned
// Place is destroyed (the call ended, however). Without credentials every caller is "the
// anonymous caller": they share one per-credential allowance. Thread-safe.
#ifndef XMOD_COORDINATOR_API_STREAM_CAPS_H_
#define XMOD_COORDINATOR_API_STREAM_CAPS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/credentials.h"

namespace xmod {

struct StreamLimits {
  int per_credential = 16;  // open calls of one credential at most
  int total = 128;          // open calls of all callers together at most
};

class StreamCaps {
 public:
  // An open stream's place; frees it when destroyed.
  class Place {
   public:
    ~Place();
    Place(const Place&) = delete;
    Place& operator=(const Place&) = delete;

   private:
    friend class StreamCaps;
    Place(StreamCaps* caps, std::string key) : caps_(caps), key_(std::move(key)) {}
    StreamCaps* const caps_;
    const std::string key_;
  };

  // `method` and `what` name the calls in errors ("WatchSweep", "open streams").
  StreamCaps(std::string method, std::string what, StreamLimits limits)
      : method_(std::move(method)), what_(std::move(what)), limits_(limits) {}

  // A place for one more call of `caller`, or RESOURCE_EXHAUSTED naming the limit it hit.
  absl::StatusOr<std::unique_ptr<Place>> Open(const Principal& caller);

 private:
  void Close(const std::string& key);

  const std::string method_;
  const std::string what_;
  const StreamLimits limits_;
  absl::Mutex mu_;
  std::map<std::string, int> open_ ABSL_GUARDED_BY(mu_);  // by credential; no zero entries
  int total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_STREAM_CAPS_H_
