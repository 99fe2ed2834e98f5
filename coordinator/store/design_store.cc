// See design_store.h.
#include "coordinator/store/design_store.h"

#include <string>

namespace xmod {

absl::StatusOr<int64_t> InsertDecision(Db& db, xmod::v1::DesignDecision* decision) {
  decision->set_id(0);
  absl::StatusOr<Stmt> insert = db.Prepare(
      "INSERT INTO design_decisions (sweep_id, created_ms, source, stop, stop_reason, "
      "compute_spent, compute_budget, observations, decision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!insert.ok()) return insert.status();
  insert->Bind(1, decision->sweep_id())
      .Bind(2, decision->created_unix_ms())
      .Bind(3, decision->source())
      .Bind(4, decision->stop() ? 1 : 0)
      .BindTextOrNull(5, decision->stop_reason())
      .Bind(6, decision->compute_spent())
      .BindOptional(7, decision->compute_budget() > 0
                           ? std::optional<double>(decision->compute_budget())
                           : std::nullopt)
      .Bind(8, decision->observations())
      .BindBlob(9, "");
  if (absl::Status s = insert->Run(); !s.ok()) return s;
  const int64_t id = db.LastInsertRowId();
  decision->set_id(id);
  // The blob carries the id, so it is written once the id is known.
  absl::StatusOr<Stmt> blob = db.Prepare("UPDATE design_decisions SET decision = ? WHERE id = ?");
  if (!blob.ok()) return blob.status();
  if (absl::Status s = blob->BindBlob(1, decision->SerializeAsString()).Bind(2, id).Run();
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Stmt> proposal = db.Prepare(
      "INSERT INTO design_proposals (decision_id, rank, backbone, seq_len, k, a, flops, "
      "needs_dense, cost_flops, value, score, reason, run_id) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!proposal.ok()) return proposal.status();
  for (int i = 0; i < decision->proposals_size(); ++i) {
    const xmod::v1::Proposal& p = decision->proposals(i);
    proposal->Reset();
    if (absl::Status s = proposal->Bind(1, id)
                             .Bind(2, i + 1)
                             .Bind(3, p.backbone())
                             .Bind(4, p.seq_len())
                             .Bind(5, p.k())
                             .Bind(6, p.a())
                             .Bind(7, p.flops())
                             .Bind(8, p.needs_dense() ? 1 : 0)
                             .Bind(9, p.cost_flops())
                             .Bind(10, p.value())
                             .Bind(11, p.score())
                             .Bind(12, p.reason())
                             .BindOptional(13, p.run_id() > 0 ? std::optional<int64_t>(p.run_id())
                                                              : std::nullopt)
                             .Run();
        !s.ok()) {
      return s;
    }
  }
  return id;
}

absl::StatusOr<std::vector<xmod::v1::DesignDecision>> LoadDecisions(Db& db, int64_t sweep_id,
                                                                    int limit) {
  absl::StatusOr<Stmt> select = db.Prepare(
      "SELECT decision FROM design_decisions WHERE sweep_id = ? ORDER BY id DESC LIMIT ?");
  if (!select.ok()) return select.status();
  select->Bind(1, sweep_id).Bind(2, limit);
  std::vector<xmod::v1::DesignDecision> out;
  while (true) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    out.emplace_back().ParseFromString(select->Text(0));
  }
}

absl::StatusOr<std::optional<xmod::v1::DesignDecision>> LoadLatestDecision(
    Db& db, int64_t sweep_id, const std::string& source) {
  absl::StatusOr<Stmt> select = db.Prepare(
      "SELECT decision FROM design_decisions WHERE sweep_id = ? AND (? = '' OR source = ?) "
      "ORDER BY id DESC LIMIT 1");
  if (!select.ok()) return select.status();
  select->Bind(1, sweep_id).Bind(2, source).Bind(3, source);
  absl::StatusOr<bool> row = select->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::nullopt;
  xmod::v1::DesignDecision decision;
  decision.ParseFromString(select->Text(0));
  return decision;
}

absl::Status InsertCensoredRun(Db& db, int64_t run_id, double flops, double live_delta,
                               const std::string& reason, int64_t now_ms) {
  absl::StatusOr<Stmt> insert = db.Prepare(
      "INSERT OR REPLACE INTO censored_runs (run_id, flops, live_delta, reason, created_ms) "
      "VALUES (?, ?, ?, ?, ?)");
  if (!insert.ok()) return insert.status();
  return insert->Bind(1, run_id)
      .Bind(2, flops)
      .Bind(3, live_delta)
      .Bind(4, reason)
      .Bind(5, now_ms)
      .Run();
}

}  // namespace xmod
