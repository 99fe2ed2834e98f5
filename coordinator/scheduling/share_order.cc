// See share_order.h.
#include "coordinator/scheduling/share_order.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <tuple>
#include <utility>

namespace xmod::scheduling {
namespace {

// Orders one band of equal priority and equal quota standing (FIFO within each user) by
// weighted share: each pick goes to the user with the fewest slots per unit of weight,
// counting `held` (slots in use) and the runs picked before; ties go to the user that used
// less per unit of weight, then to the earlier run.
void OrderBand(const std::vector<QueuedRun>& band, std::map<std::string, double> held,
               const UsedByUser& used, const SharingPolicy& policy, std::vector<QueuedRun>* out) {
  std::map<std::string, std::deque<size_t>> by_user;  // indices into band, FIFO
  for (size_t i = 0; i < band.size(); ++i) by_user[band[i].user].push_back(i);
  std::map<std::string, double> weight;
  for (const auto& [user, runs] : by_user) weight[user] = policy.For(user).weight;
  for (size_t picked = 0; picked < band.size(); ++picked) {
    const std::string* best = nullptr;
    std::tuple<double, double, size_t> best_key{std::numeric_limits<double>::infinity(), 0,
                                                band.size()};
    for (const auto& [user, runs] : by_user) {
      if (runs.empty()) continue;
      auto u = used.find(user);
      const std::tuple<double, double, size_t> key{held[user] / weight[user],
                                                   (u == used.end() ? 0 : u->second) / weight[user],
                                                   runs.front()};
      if (key < best_key) {
        best = &user;
        best_key = key;
      }
    }
    const size_t best_index = std::get<2>(best_key);
    by_user[*best].pop_front();
    held[*best] += SlotsOf(band[best_index]);
    out->push_back(band[best_index]);
  }
}

}  // namespace

double AttemptSlotMs(const AttemptEntry& attempt, int64_t mono) {
  int slots = 0;
  for (const Member& m : attempt.members) slots += static_cast<int>(m.slots.size());
  return static_cast<double>(slots) *
         static_cast<double>(std::max<int64_t>(0, mono - attempt.started_ms));
}

bool Borrowing(const QueuedRun& run, const SlotsByUser& in_use, xmod::v1::SlotKind kind,
               const SharingPolicy& policy) {
  const std::optional<int> quota = policy.For(run.user).Quota(kind);
  if (!quota) return false;
  auto it = in_use.find(run.user);
  const int held = it == in_use.end() ? 0 : it->second.Of(kind);
  return held + SlotsOf(run) > *quota;
}

std::vector<QueuedRun> ShareOrder(const std::vector<QueuedRun>& queue, const SlotsByUser& in_use,
                                  const UsedByUser& used, xmod::v1::SlotKind kind,
                                  const SharingPolicy& policy) {
  std::map<std::string, double> held;
  for (const auto& [user, slots] : in_use) held[user] = slots.Of(kind);
  std::vector<QueuedRun> within, borrowing;
  for (QueuedRun run : queue) {
    run.borrowing = Borrowing(run, in_use, kind, policy);
    (run.borrowing ? borrowing : within).push_back(std::move(run));
  }
  std::vector<QueuedRun> ordered;
  ordered.reserve(queue.size());
  for (const std::vector<QueuedRun>* part : {&within, &borrowing}) {
    // Bands of equal priority, in the queue's (descending) priority order.
    for (size_t begin = 0; begin < part->size();) {
      size_t end = begin;
      while (end < part->size() && (*part)[end].priority == (*part)[begin].priority) ++end;
      OrderBand({part->begin() + begin, part->begin() + end}, held, used, policy, &ordered);
      begin = end;
    }
  }
  return ordered;
}

}  // namespace xmod::scheduling
