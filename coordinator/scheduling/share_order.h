// Quotas and fair share, pure (docs/operations.md, "Sharing a cluster"): the order in which
// the placement policy (placement.h) considers the queue for a polling worker. Runs whose
// user stays within its quota come first, then the runs that would borrow idle slots beyond
// it (marked `borrowing`: they never reserve workers and never preempt). Within each part:
// higher priority first; among equal priorities the user furthest below its weighted share
// of the slots of the poller's kind goes first (the user with the fewest slots in use per
// unit of weight, counting the runs ordered ahead of it as if placed); on a tie the user
// that used the fewest slot-milliseconds per unit of weight (`used`), then FIFO.
#ifndef XMOD_COORDINATOR_SCHEDULING_SHARE_ORDER_H_
#define XMOD_COORDINATOR_SCHEDULING_SHARE_ORDER_H_

#include <map>
#include <string>
#include <vector>

#include "coordinator/scheduling/live_state.h"
#include "coordinator/scheduling/placement.h"
#include "coordinator/scheduling/sharing_config.h"
#include "xmod/v1/worker.pb.h"

namespace xmod::scheduling {

// Slots a user's open attempts hold, by kind.
struct UserSlots {
  int gpu = 0;
  int cpu = 0;
  int Of(xmod::v1::SlotKind kind) const { return kind == xmod::v1::CUDA ? gpu : cpu; }
  int& Of(xmod::v1::SlotKind kind) { return kind == xmod::v1::CUDA ? gpu : cpu; }
};
using SlotsByUser = std::map<std::string, UserSlots>;
// Slot-milliseconds each user's attempts used (the share order's tie-break).
using UsedByUser = std::map<std::string, double>;

// Slots a run holds in all: members × slots per member.
inline int SlotsOf(const QueuedRun& run) { return run.members * run.slots_per_member; }

// Slot-milliseconds `attempt` used up to monotonic `mono`.
double AttemptSlotMs(const AttemptEntry& attempt, int64_t mono);

// Whether placing `run` (slots of `kind`) takes its user past its quota.
bool Borrowing(const QueuedRun& run, const SlotsByUser& in_use, xmod::v1::SlotKind kind,
               const SharingPolicy& policy);

// `queue` (priority, then FIFO) in the order above for a poller with slots of `kind`.
std::vector<QueuedRun> ShareOrder(const std::vector<QueuedRun>& queue, const SlotsByUser& in_use,
                                  const UsedByUser& used, xmod::v1::SlotKind kind,
                                  const SharingPolicy& policy);

}  // namespace xmod::scheduling

#endif  // XMOD_COORDINATOR_SCHEDULING_SHARE_ORDER_H_
