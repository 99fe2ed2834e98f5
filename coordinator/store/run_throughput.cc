// See run_throughput.h.
#include "coordinator/store/run_throughput.h"

#include "coordinator/store/row_loop.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

absl::StatusOr<std::vector<ThroughputSample>> LoadThroughputSamples(Db& db, int limit) {
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "SELECT r.spec, r.tokens_per_second, m.slot_kind FROM runs r"
      " JOIN attempt_members m ON m.run_id = r.id AND m.attempt = r.attempts AND m.member = 0"
      " WHERE r.state = 'SUCCEEDED' AND r.tokens_per_second > 0 AND m.slot_kind IS NOT NULL"
      " ORDER BY r.finished_ms DESC, r.id DESC LIMIT ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, static_cast<int64_t>(limit));
  std::vector<ThroughputSample> samples;
  absl::Status read = ForEachRow(*stmt, [&samples](const Stmt& s) {
    ThroughputSample& sample = samples.emplace_back();
    sample.spec.ParseFromString(s.Text(0));
    sample.tokens_per_second = s.Double(1);
    sample.slot_kind = s.Text(2);
  });
  if (!read.ok()) return read;
  return samples;
}

absl::StatusOr<SlotCounts> LoadRecentSlots(Db& db, int64_t seen_since_ms) {
  absl::StatusOr<Stmt> stmt = db.Prepare("SELECT slots FROM workers WHERE last_seen_ms >= ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, seen_since_ms);
  SlotCounts counts;
  absl::Status read = ForEachRow(*stmt, [&counts](const Stmt& s) {
    xmod::v1::RegisterRequest registered;
    if (!registered.ParseFromString(s.Text(0))) return;
    for (const xmod::v1::Slot& slot : registered.slots()) {
      (slot.kind() == xmod::v1::CUDA ? counts.gpu : counts.cpu) += 1;
    }
  });
  if (!read.ok()) return read;
  return counts;
}

}  // namespace xmod
