// See preemption.h.
#include "coordinator/scheduling/preemption.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace xmod::scheduling {
namespace {

// The queued runs a pass looks at, at most: enough for every slot of a large cluster.
constexpr int kMaxClaimants = 256;

const char* KindName(xmod::v1::SlotKind kind) { return kind == xmod::v1::CUDA ? "gpu" : "cpu"; }

int TotalSlots(const RunningAttempt& a) {
  int n = 0;
  for (const auto& [worker, slots] : a.members) n += slots;
  return n;
}

// One pass over the queue, with the cluster's room as the runs ahead left it.
class Preemptor {
 public:
  Preemptor(const std::vector<RunningAttempt>& running,
            const std::map<int64_t, WorkerRoom>& workers, const SlotsByUser& in_use,
            const SharingPolicy& policy, int64_t now_ms)
      : running_(running),
        rooms_(workers),
        in_use_(in_use),
        policy_(policy),
        now_ms_(now_ms),
        stopping_(running.size(), false) {
    for (size_t i = 0; i < running_.size(); ++i) {
      if (running_[i].ordered) Release(i);  // its slots are as good as free
    }
  }

  void Consider(const QueuedRun& run, std::vector<PreemptOrder>* orders) {
    const int per = run.slots_per_member;
    // (victims needed, sum of their places in victim order, worker): the fewest, then the
    // ones first in victim order.
    std::vector<std::tuple<size_t, size_t, int64_t>> plans;
    std::map<int64_t, std::vector<size_t>> victims_on;
    const std::vector<size_t> order = EligibleInOrder(run);
    for (const auto& [id, room] : rooms_) {
      if (room.slots < per) continue;
      if (room.free >= per) {
        plans.emplace_back(0, 0, id);
        continue;
      }
      if (run.borrowing || Borrowing(run, in_use_, room.kind, policy_)) continue;
      size_t places = 0;
      std::optional<std::vector<size_t>> victims = VictimsOn(id, room, run, order, &places);
      if (!victims) continue;
      plans.emplace_back(victims->size(), places, id);
      victims_on[id] = *std::move(victims);
    }
    if (static_cast<int>(plans.size()) < run.members) return;  // it waits
    std::sort(plans.begin(), plans.end());
    plans.resize(run.members);
    std::set<size_t> chosen;
    for (const auto& [count, places, worker] : plans) {
      for (size_t v : victims_on[worker]) chosen.insert(v);
    }
    // Reasons as the cluster stands before any of them stops.
    for (size_t v : chosen) orders->push_back(Order(v, run));
    for (size_t v : chosen) Release(v);
    for (const auto& [count, places, worker] : plans) {
      WorkerRoom& room = rooms_.at(worker);
      room.free -= per;
      in_use_[run.user].Of(room.kind) += per;
    }
  }

 private:
  // The slots of attempt `i` go back to its workers and leave its user's count.
  void Release(size_t i) {
    stopping_[i] = true;
    const RunningAttempt& a = running_[i];
    for (const auto& [worker, slots] : a.members) {
      auto room = rooms_.find(worker);
      if (room != rooms_.end()) room->second.free += slots;
    }
    in_use_[a.user].Of(a.kind) -= TotalSlots(a);
  }

  // Slots `user` holds of `kind` beyond its quota (0 without a quota).
  int Borrowed(const std::string& user, xmod::v1::SlotKind kind) const {
    const std::optional<int> quota = policy_.For(user).Quota(kind);
    auto it = in_use_.find(user);
    if (!quota || it == in_use_.end()) return 0;
    return std::max(0, it->second.Of(kind) - *quota);
  }

  // Why attempt `a` may make room for `run`: "priority", "quota", or "" (it may not). Slots
  // borrowed beyond a quota are taken back whatever the borrower's `preemptible` says.
  std::string Cause(const RunningAttempt& a, const QueuedRun& run, int borrowed) const {
    if (now_ms_ - a.started_ms < policy_.min_run_ms) return "";
    if (a.user != run.user && borrowed >= TotalSlots(a)) return "quota";
    if (a.preemptible && a.priority < run.priority) return "priority";
    return "";
  }

  // The attempts that may make room for `run`, in victim order: borrowed first (preemptible
  // ones first), then lowest priority, then most recently checkpointed or started, then
  // newest attempt.
  std::vector<size_t> EligibleInOrder(const QueuedRun& run) const {
    std::vector<std::tuple<bool, bool, int, int64_t, int, size_t>> eligible;
    for (size_t i = 0; i < running_.size(); ++i) {
      const RunningAttempt& a = running_[i];
      if (stopping_[i]) continue;
      const std::string cause = Cause(a, run, Borrowed(a.user, a.kind));
      if (cause.empty()) continue;
      const int64_t fresh = std::max(a.checkpointed_ms, a.started_ms);
      eligible.emplace_back(cause != "quota", !a.preemptible, a.priority, -fresh, -a.key.second, i);
    }
    std::sort(eligible.begin(), eligible.end());
    std::vector<size_t> order;
    for (const auto& e : eligible) order.push_back(std::get<5>(e));
    return order;
  }

  // The fewest victims with a member on `worker` that free `run`'s slots there, taken from
  // the front of `order`, with the sum of their places in it; nullopt when the eligible ones
  // do not free enough.
  std::optional<std::vector<size_t>> VictimsOn(int64_t worker, const WorkerRoom& room,
                                               const QueuedRun& run,
                                               const std::vector<size_t>& order,
                                               size_t* places) const {
    std::vector<size_t> victims;
    int free = room.free;
    std::map<std::string, int> taken;  // slots taken back from each borrowing user
    for (size_t place = 0; place < order.size() && free < run.slots_per_member; ++place) {
      const RunningAttempt& a = running_[order[place]];
      auto on = std::find_if(a.members.begin(), a.members.end(),
                             [&](const auto& m) { return m.first == worker; });
      if (on == a.members.end()) continue;
      const std::string cause = Cause(a, run, Borrowed(a.user, a.kind) - taken[a.user]);
      if (cause.empty()) continue;
      if (cause == "quota") taken[a.user] += TotalSlots(a);
      victims.push_back(order[place]);
      *places += place;
      free += on->second;
    }
    if (free < run.slots_per_member) return std::nullopt;
    return victims;
  }

  PreemptOrder Order(size_t i, const QueuedRun& run) const {
    const RunningAttempt& a = running_[i];
    const int borrowed = Borrowed(a.user, a.kind);
    PreemptOrder order{a.key, Cause(a, run, borrowed), "", run.user};
    const std::string claimant =
        absl::StrCat("run ", run.run_id, " (priority ", run.priority, ", user \"", run.user, "\")");
    if (order.cause == "quota") {
      order.reason = absl::StrCat(
          "preempted for ", claimant, ", within its quota: user \"", a.user, "\" holds ", borrowed,
          " ", KindName(a.kind), " slots beyond its quota of ", *policy_.For(a.user).Quota(a.kind));
    } else {
      order.reason = absl::StrCat("preempted for ", claimant, ": this run's priority ", a.priority,
                                  " is lower");
    }
    return order;
  }

  const std::vector<RunningAttempt>& running_;
  std::map<int64_t, WorkerRoom> rooms_;
  SlotsByUser in_use_;
  const SharingPolicy& policy_;
  const int64_t now_ms_;
  std::vector<bool> stopping_;  // ordered before or in this pass
};

}  // namespace

std::vector<PreemptOrder> PlanPreemptions(const std::vector<QueuedRun>& queue,
                                          const std::vector<RunningAttempt>& running,
                                          const std::map<int64_t, WorkerRoom>& workers,
                                          const SlotsByUser& in_use, const SharingPolicy& policy,
                                          int64_t now_ms) {
  Preemptor preemptor(running, workers, in_use, policy, now_ms);
  std::vector<PreemptOrder> orders;
  int considered = 0;
  for (const QueuedRun& run : queue) {
    if (run.not_before_ms > now_ms) continue;
    if (++considered > kMaxClaimants) break;
    preemptor.Consider(run, &orders);
  }
  return orders;
}

}  // namespace xmod::scheduling
