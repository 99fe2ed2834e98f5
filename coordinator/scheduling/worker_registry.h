// WorkerRegistry: the workers the coordinator knows (scheduler.h, "Owners") — each one's
// registration (slots, advertised host, rendezvous ports), its liveness (its last heartbeat
// on the monotonic clock), its registration count (the epoch that fences attempts begun in an
// earlier life of the worker) and, while it long-polls, its free slots and the next
// rendezvous port it hands out.
//
// Contract: owns WorkerEntry and nothing else; calls nothing and stores nothing (the
// Scheduler writes the workers table and applies what it stored here). Not thread-safe: it
// is a member of the Scheduler guarded by the scheduling lock, because a placement reads the
// run queue and the workers' free slots and takes both in one decision (as Ray's GCS managers
// share one event loop). A liveness reading takes the monotonic time from its caller.
#ifndef XMOD_COORDINATOR_SCHEDULING_WORKER_REGISTRY_H_
#define XMOD_COORDINATOR_SCHEDULING_WORKER_REGISTRY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/store/scheduler_rows.h"
#include "xmod/v1/types.pb.h"
#include "xmod/v1/worker.pb.h"

namespace xmod::scheduling {

struct WorkerEntry {
  std::string name;
  std::vector<xmod::v1::Slot> slots;
  int64_t last_seen_ms = 0;  // monotonic
  int64_t epoch = 0;         // registrations seen by this coordinator process
  std::string host;          // advertised address (RegisterRequest.advertise_host)
  int32_t port_first = 0;    // rendezvous ports it declared (0 = none)
  int32_t port_last = 0;
  int32_t next_port = 0;  // the next one to hand out, round robin
  // Free slots as of its last AcquireRun, less those leased since; meaningful while it
  // polls (polling > 0) or stopped polling at most a heartbeat interval ago.
  std::vector<int32_t> free_slots;
  int polling = 0;
  int64_t poll_ended_ms = 0;  // monotonic
  // Its heartbeats said it drains (HeartbeatRequest.leaving): live until its TTL passes, but
  // no room for a run. Cleared by its next registration.
  bool leaving = false;
};

// INVALID_ARGUMENT naming the field of a registration the scheduler cannot take: an empty
// or comma-holding name (a gang's attempt row lists its members' names comma-separated), a
// repeated slot index, a port range outside 1..65535.
absl::Status CheckRegistration(const xmod::v1::RegisterRequest& request);

// The rendezvous address of a gang's TCPStore on `host`:`port` ("tcp://host:port").
std::string RendezvousAddress(const std::string& host, int32_t port);

class WorkerRegistry {
 public:
  // A worker is live while its last heartbeat is at most `lease_ttl_ms` old.
  explicit WorkerRegistry(int64_t lease_ttl_ms) : lease_ttl_ms_(lease_ttl_ms) {}

  // Applies stored registration `registration` (advertise_host filled in) of worker `id` at
  // monotonic `mono`: its slots and ports as declared, its free slots unknown until it polls,
  // its epoch one higher (attempts begun before are lost unless its next heartbeat lists
  // them).
  void Register(int64_t id, const xmod::v1::RegisterRequest& registration, int64_t mono);
  // The workers of a database snapshot, after a restart; a row's wall-clock last_seen_ms
  // becomes monotonic by `now` (wall) and `mono` (monotonic) read together.
  void Restore(const std::vector<WorkerRow>& rows, int64_t now, int64_t mono);

  // Null when unknown. Changes go through the methods below.
  const WorkerEntry* Find(int64_t id) const;
  const std::map<int64_t, WorkerEntry>& entries() const { return workers_; }
  bool empty() const { return workers_.empty(); }

  // A heartbeat of worker `id` arrived at `mono` (an older reading changes nothing); once one
  // says `leaving`, the worker stays leaving until it registers again.
  void Seen(int64_t id, int64_t mono, bool leaving);
  bool IsLive(const WorkerEntry& worker, int64_t mono) const {
    return mono - worker.last_seen_ms <= lease_ttl_ms_;
  }
  int CountLive(int64_t mono) const;

  // Worker `id` long-polls with `free_slots` (current while it polls: gangs placed by others
  // may use them), and stops polling at `mono`.
  void BeginPoll(int64_t id, const std::vector<int32_t>& free_slots);
  void EndPoll(int64_t id, int64_t mono);
  // Takes `slots` off worker `id`'s free slots (a lease or a gang part it took).
  void TakeSlots(int64_t id, const std::vector<int32_t>& slots);
  // The rendezvous address of a gang placed with `port` on worker `id`; the next gang there
  // tries the port after it first.
  std::string TakePort(int64_t id, int32_t port);

  // The kind of worker `id`'s slots (its first slot's; CPU when it has none or is unknown).
  xmod::v1::SlotKind KindOf(int64_t id) const;
  // The cores of worker `id`'s `slots` (at least 1 a slot).
  int CoresOf(int64_t id, const std::vector<int32_t>& slots) const;

 private:
  const int64_t lease_ttl_ms_;
  std::map<int64_t, WorkerEntry> workers_;
};

}  // namespace xmod::scheduling

#endif  // XMOD_COORDINATOR_SCHEDULING_WORKER_REGISTRY_H_
