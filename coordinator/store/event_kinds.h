// Event kinds in C++: the `event_kind_name` of each xmod.v1.EventKind value
// (proto/xmod/v1/event_kind.proto, their one definition), as the events table stores them.
// Thread-safe.
#ifndef XMOD_COORDINATOR_STORE_EVENT_KINDS_H_
#define XMOD_COORDINATOR_STORE_EVENT_KINDS_H_

#include <string>
#include <string_view>

#include "xmod/v1/event_kind.pb.h"

namespace xmod {

// The kind as stored, e.g. run_preempt_ordered for EVENT_RUN_PREEMPT_ORDERED; empty for
// EVENT_KIND_UNSPECIFIED and values this build does not know.
const std::string& EventKindName(xmod::v1::EventKind kind);

// The kind of the event that ends an attempt with stored outcome `outcome` ("succeeded",
// "failed", "cancelled", "preempted" or "lost"); EVENT_KIND_UNSPECIFIED for another.
xmod::v1::EventKind AttemptEndedKind(std::string_view outcome);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_EVENT_KINDS_H_
