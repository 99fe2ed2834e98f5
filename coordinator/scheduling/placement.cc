// See placement.h.
#include "coordinator/scheduling/placement.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace xmod::scheduling {
namespace {

std::vector<int32_t> FirstSlots(const std::vector<int32_t>& slots, int n) {
  return std::vector<int32_t>(slots.begin(), slots.begin() + n);
}

bool Live(const WorkerEntry& worker, const PlacementClock& clock) {
  return clock.now_ms - worker.last_seen_ms <= clock.lease_ttl_ms;
}

// Whether `worker` is live, not draining, and polling (its free slots are current).
bool Available(const WorkerEntry& worker, const PlacementClock& clock) {
  return Live(worker, clock) && !worker.leaving &&
         (worker.polling > 0 || clock.now_ms - worker.poll_ended_ms <= clock.heartbeat_interval_ms);
}

// Why a gang with enough ready workers (`ready`) has no member 0: none of them has a free
// rendezvous port.
std::string NoPortReason(const std::vector<int64_t>& ready,
                         const std::map<int64_t, WorkerEntry>& workers) {
  std::vector<std::string> ranges;
  for (int64_t id : ready) {
    const WorkerEntry& w = workers.at(id);
    if (w.port_first > 0) {
      ranges.push_back(
          absl::StrCat(w.name, " (", w.host, ":", w.port_first, "-", w.port_last, ")"));
    }
  }
  if (ranges.empty()) {
    return "waiting for a rendezvous port: no ready worker declares any (xmod-worker "
           "--rendezvous_ports)";
  }
  return absl::StrCat("waiting for a rendezvous port: every port of ", absl::StrJoin(ranges, ", "),
                      " is held by an open gang");
}

// The scan of the queue, run by run.
class Planner {
 public:
  Planner(const std::map<int64_t, WorkerEntry>& workers, const std::set<std::string>& held,
          const PlacementClock& clock)
      : workers_(workers), held_(held), clock_(clock), me_(workers.at(clock.poller)) {}

  // Whether the scan goes on past `run` (false: `plan_` is final).
  bool Consider(const QueuedRun& run) {
    if (run.not_before_ms > clock_.now_ms) {
      plan_.next_ready_ms = plan_.next_ready_ms < 0
                                ? run.not_before_ms
                                : std::min(plan_.next_ready_ms, run.not_before_ms);
      return true;
    }
    return run.members == 1 ? ConsiderSingle(run) : ConsiderGang(run);
  }

  PlacementPlan Finish() && { return std::move(plan_); }

 private:
  // On the poller only. A run that fits its size but not its free slots now reserves it:
  // nothing behind it is leased here, so its slots drain. A run bigger than the worker
  // waits for a bigger one.
  bool ConsiderSingle(const QueuedRun& run) {
    if (reserved_.count(clock_.poller) > 0) return false;
    const int per = run.slots_per_member;
    const int my_free = static_cast<int>(me_.free_slots.size());
    if (per <= my_free) {
      Place(Placement{run.run_id, {{clock_.poller, FirstSlots(me_.free_slots, per)}}, 0});
      return false;
    }
    if (!run.borrowing && per <= static_cast<int>(me_.slots.size())) {
      plan_.reservations.push_back({run.run_id, {clock_.poller}});
      return false;
    }
    return true;
  }

  // A gang: `members` distinct workers not reserved ahead, each with `per` free slots.
  bool ConsiderGang(const QueuedRun& run) {
    const int per = run.slots_per_member;
    std::vector<int64_t> ready;  // polling, with the slots free now
    std::vector<int64_t> able;   // live, with that many slots at all
    for (const auto& [id, worker] : workers_) {
      if (reserved_.count(id) > 0 || static_cast<int>(worker.slots.size()) < per ||
          !Live(worker, clock_)) {
        continue;
      }
      able.push_back(id);
      if (Available(worker, clock_) && static_cast<int>(worker.free_slots.size()) >= per) {
        ready.push_back(id);
      }
    }
    std::string reason;
    if (static_cast<int>(ready.size()) >= run.members) {
      if (std::optional<Placement> placement = PlaceGang(run, ready)) {
        plan_.pending_reasons.emplace_back(run.run_id, "");
        Place(*std::move(placement));
        return false;
      }
      reason = NoPortReason(ready, workers_);
    }
    plan_.pending_reasons.emplace_back(run.run_id, reason);
    if (!run.borrowing && static_cast<int>(able.size()) >= run.members) Reserve(run, able);
    return true;  // else it waits for the cluster to grow
  }

  // Member 0 serves the store, so it needs a free rendezvous port; the poller first if it
  // can. nullopt when no ready worker has one.
  std::optional<Placement> PlaceGang(const QueuedRun& run, std::vector<int64_t> ready) const {
    std::stable_partition(ready.begin(), ready.end(),
                          [&](int64_t id) { return id == clock_.poller; });
    std::optional<int32_t> port;
    auto host = std::find_if(ready.begin(), ready.end(), [&](int64_t id) {
      return (port = FreePort(workers_.at(id), held_)).has_value();
    });
    if (host == ready.end()) return std::nullopt;
    std::rotate(ready.begin(), host, host + 1);
    Placement placement{run.run_id, {}, *port};
    for (int m = 0; m < run.members; ++m) {
      placement.members.emplace_back(
          ready[m], FirstSlots(workers_.at(ready[m]).free_slots, run.slots_per_member));
    }
    return placement;
  }

  // Reserves the workers closest to fitting; they only gain free slots until it starts.
  void Reserve(const QueuedRun& run, std::vector<int64_t> able) {
    auto room = [&](int64_t id) {
      return std::min(run.slots_per_member, static_cast<int>(workers_.at(id).free_slots.size()));
    };
    std::stable_sort(able.begin(), able.end(),
                     [&](int64_t a, int64_t b) { return room(a) > room(b); });
    able.resize(run.members);
    reserved_.insert(able.begin(), able.end());
    plan_.reservations.push_back({run.run_id, std::move(able)});
  }

  void Place(Placement placement) {
    plan_.backfill = !plan_.reservations.empty();
    plan_.placement = std::move(placement);
  }

  const std::map<int64_t, WorkerEntry>& workers_;
  const std::set<std::string>& held_;
  const PlacementClock& clock_;
  const WorkerEntry& me_;
  std::set<int64_t> reserved_;  // workers held for a run ahead in the queue
  PlacementPlan plan_;
};

}  // namespace

int MembersNeeded(const xmod::v1::RunSpec& spec) {
  const int ranks = std::max(1, spec.training().ranks());
  const int per = spec.training().ranks_per_worker();
  return per > 0 && per < ranks ? ranks / per : 1;
}

int SlotsPerMember(const xmod::v1::RunSpec& spec) {
  const int ranks = std::max(1, spec.training().ranks());
  return MembersNeeded(spec) > 1 ? spec.training().ranks_per_worker() : ranks;
}

QueuedRun QueuedRunOf(int64_t run_id, const RunEntry& run) {
  return QueuedRun{run_id,   run.not_before_ms, MembersNeeded(run.spec), SlotsPerMember(run.spec),
                   run.user, run.priority};
}

PlacementPlan PlanPlacement(const std::vector<QueuedRun>& queue,
                            const std::map<int64_t, WorkerEntry>& workers,
                            const std::set<std::string>& held, const PlacementClock& clock) {
  Planner planner(workers, held, clock);
  for (const QueuedRun& run : queue) {
    if (!planner.Consider(run)) break;
  }
  return std::move(planner).Finish();
}

std::optional<int32_t> FreePort(const WorkerEntry& worker, const std::set<std::string>& held) {
  if (worker.port_first <= 0) return std::nullopt;
  // Ends within held.size() + 1 tries unless the range is exhausted (span <= held.size()).
  const int32_t span = worker.port_last - worker.port_first + 1;
  for (int32_t i = 0; i < span; ++i) {
    const int32_t port = worker.port_first + (worker.next_port + i) % span;
    if (held.count(RendezvousAddress(worker.host, port)) == 0) return port;
  }
  return std::nullopt;
}

}  // namespace xmod::scheduling
