// See leases.h.
#include "coordinator/scheduling/leases.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/scheduling/memory_plan.h"
#include "coordinator/store/event_rows.h"
#include "coordinator/store/scheduler_rows.h"
#include "coordinator/store/store_writes.h"

namespace xmod::scheduling {
namespace {

std::vector<AttemptMemberRow> MemberRows(const AttemptEntry& attempt) {
  std::vector<AttemptMemberRow> rows;
  for (const Member& m : attempt.members) rows.push_back({m.worker_id, m.worker, m.slots});
  return rows;
}

}  // namespace

std::set<std::string> HeldRendezvous(const LiveState& live, const WorkerRegistry& workers) {
  std::set<std::string> held;
  for (const auto& [key, open] : live.attempts) {
    if (!open.rendezvous.empty()) {
      held.insert(open.rendezvous);
    } else if (open.members.size() > 1) {
      // A gang recorded before its address was (schema version < 5): any port of its
      // member 0's range may be its store, so all of them are held until it ends.
      const WorkerEntry* host = workers.Find(open.members.front().worker_id);
      if (host == nullptr || host->port_first <= 0) continue;
      for (int32_t port = host->port_first; port <= host->port_last; ++port) {
        held.insert(RendezvousAddress(host->host, port));
      }
    }
  }
  return held;
}

xmod::v1::Assignment BaseAssignment(int64_t run_id, const RunEntry& run,
                                    const std::string& checkpoint_dir) {
  xmod::v1::Assignment base;
  base.set_run_id(run_id);
  base.set_attempt(run.attempts);
  *base.mutable_spec() = run.spec;
  base.mutable_spec()->set_run_id(run_id);
  base.mutable_spec()->set_attempt(run.attempts);
  base.mutable_spec()->set_checkpoint_dir(checkpoint_dir);
  // After out-of-memory failures, the rung of the memory ladder they reached.
  if (std::optional<MemoryPlan> plan = MemoryPlanAfter(run.spec.training(), run.oom_failures)) {
    ApplyMemoryPlan(*plan, base.mutable_spec()->mutable_training());
  }
  if (run.latest_checkpoint) {
    *base.mutable_resume() = ResumePointOf(*run.latest_checkpoint);
    if (run.previous_checkpoint) *base.add_fallbacks() = ResumePointOf(*run.previous_checkpoint);
  }
  return base;
}

Lease GrantLease(WorkerRegistry& workers, const Placement& placement,
                 const xmod::v1::Assignment& base, int world, int64_t mono, int64_t arrived,
                 const SchedulerOptions& options) {
  const bool gang = placement.members.size() > 1;
  Lease lease;
  if (gang) {
    lease.attempt.rendezvous = workers.TakePort(placement.members[0].first, placement.port);
  }
  for (size_t m = 0; m < placement.members.size(); ++m) {
    const auto& [worker_id, slots] = placement.members[m];
    const WorkerEntry& worker = *workers.Find(worker_id);
    Member member;
    member.worker_id = worker_id;
    member.worker = worker.name;
    member.worker_epoch = worker.epoch;
    member.slots = slots;
    member.delivered = !gang;  // a gang's members take their parts when they poll
    member.lease_expires_ms = mono + (gang ? options.gang_start_timeout_ms : options.lease_ttl_ms);
    lease.attempt.members.push_back(member);
    workers.TakeSlots(worker_id, slots);
    xmod::v1::Assignment part = base;
    for (int32_t slot : slots) part.add_slots(slot);
    if (gang) {
      xmod::v1::GangPart* g = part.mutable_gang();
      g->set_member(static_cast<int32_t>(m));
      g->set_members(static_cast<int32_t>(placement.members.size()));
      g->set_rank_offset(static_cast<int32_t>(m * slots.size()));
      g->set_world_size(world);
      g->set_rendezvous(lease.attempt.rendezvous);
      g->set_host(worker.host);
    } else {
      part.set_lease_ttl_ms(member.lease_expires_ms - arrived);
    }
    lease.parts.push_back(std::move(part));
  }
  if (gang) lease.attempt.parts = lease.parts;
  return lease;
}

Store::WriteFn StartAttemptWrite(int64_t sweep_id, int64_t run_id, const RunEntry& run,
                                 const Lease& lease, int64_t resumed_from_step, int64_t now,
                                 const SchedulerOptions& options) {
  const bool gang = lease.attempt.members.size() > 1;
  AttemptStart start;
  start.run_id = run_id;
  start.attempt = lease.parts.front().attempt();
  start.started_ms = now;
  start.resumed_from_step = resumed_from_step;
  start.lease_expires_ms = now + (gang ? options.gang_start_timeout_ms : options.lease_ttl_ms);
  start.rendezvous = lease.attempt.rendezvous;
  if (std::optional<MemoryPlan> plan = MemoryPlanAfter(run.spec.training(), run.oom_failures)) {
    start.memory_plan = plan->description;
  }
  return [start, members = MemberRows(lease.attempt), sweep_id](Db& db) {
    if (absl::Status s = InsertAttemptWithMembers(db, start, members); !s.ok()) return s;
    RunUpdate u;
    u.run_id = start.run_id;
    u.state = xmod::v1::RUNNING;
    u.attempts = start.attempt;
    if (absl::Status s = UpdateRun(db, u); !s.ok()) return s;
    if (absl::Status s = MarkRunStarted(db, start.run_id, start.started_ms); !s.ok()) return s;
    return InsertEvent(
        db, start.started_ms, xmod::v1::EVENT_ATTEMPT_STARTED, sweep_id, start.run_id,
        absl::StrCat(
            "attempt ", start.attempt, " on ", JoinedMemberNames(members),
            start.rendezvous.empty() ? "" : absl::StrCat(" (gang, ", start.rendezvous, ")"),
            start.resumed_from_step > 0 ? absl::StrCat(" from step ", start.resumed_from_step) : "",
            start.memory_plan.empty() ? "" : absl::StrCat(", with ", start.memory_plan)));
  };
}

std::optional<xmod::v1::Assignment> TakePart(LiveState& live, WorkerRegistry& workers,
                                             int64_t worker_id, int64_t arrived, int64_t mono,
                                             const SchedulerOptions& options) {
  for (auto& [key, attempt] : live.attempts) {
    auto run = live.runs.find(key.first);
    // A cancelled run's parts are never handed out; its members' leases lapse.
    if (attempt.parts.empty() || run == live.runs.end() ||
        run->second.current_attempt != key.second || run->second.state != xmod::v1::RUNNING) {
      continue;
    }
    for (size_t m = 0; m < attempt.members.size(); ++m) {
      Member& member = attempt.members[m];
      if (member.worker_id != worker_id || member.delivered) continue;
      member.delivered = true;
      member.worker_epoch = workers.Find(worker_id)->epoch;
      member.lease_expires_ms = mono + options.lease_ttl_ms;
      workers.TakeSlots(worker_id, member.slots);
      xmod::v1::Assignment part = attempt.parts[m];
      part.set_lease_ttl_ms(member.lease_expires_ms - arrived);
      return part;
    }
  }
  return std::nullopt;
}

}  // namespace xmod::scheduling
