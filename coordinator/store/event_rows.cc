// The events table. See event_rows.h.
#include "coordinator/store/event_rows.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/store/event_kinds.h"

namespace xmod {
namespace {

std::optional<int64_t> NullIfZero(int64_t value) {
  return value == 0 ? std::nullopt : std::optional<int64_t>(value);
}

// The WHERE clause of `query` with `?` placeholders, and a binder for them in order.
std::string WhereClause(const EventQuery& query) {
  std::vector<std::string> terms;
  if (query.sweep_id != 0) terms.push_back("sweep_id = ?");
  if (query.run_id != 0) terms.push_back("run_id = ?");
  if (query.actor.has_value()) terms.push_back("actor = ?");
  if (query.before_id != 0) terms.push_back("id < ?");
  if (query.since_ms != 0) terms.push_back("time_ms >= ?");
  if (query.changes_only) terms.push_back("actor IS NOT NULL");
  return terms.empty() ? "" : absl::StrCat("WHERE ", absl::StrJoin(terms, " AND "));
}

void BindQuery(const EventQuery& query, Stmt& stmt) {
  int index = 0;
  if (query.sweep_id != 0) stmt.Bind(++index, query.sweep_id);
  if (query.run_id != 0) stmt.Bind(++index, query.run_id);
  if (query.actor.has_value()) stmt.Bind(++index, *query.actor);
  if (query.before_id != 0) stmt.Bind(++index, query.before_id);
  if (query.since_ms != 0) stmt.Bind(++index, query.since_ms);
  stmt.Bind(++index, static_cast<int64_t>(query.limit));
}

xmod::v1::Event EventOf(const Stmt& row) {
  xmod::v1::Event event;
  event.set_id(row.Int(0));
  event.set_time_unix_ms(row.Int(1));
  event.set_kind(row.Text(2));
  event.set_sweep_id(row.Int(3));  // NULL reads as 0: none
  event.set_run_id(row.Int(4));
  event.set_text(row.Text(5));
  if (!row.IsNull(6)) event.set_actor(row.Text(6));
  return event;
}

}  // namespace

absl::Status InsertEvent(Db& db, int64_t now_ms, xmod::v1::EventKind kind, int64_t sweep_id,
                         int64_t run_id, const std::string& text,
                         const std::optional<std::string>& actor) {
  const std::string& name = EventKindName(kind);
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("event kind ", kind, " has no name"));
  }
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "INSERT INTO events (time_ms, kind, sweep_id, run_id, text, actor) VALUES (?,?,?,?,?,?)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, now_ms).Bind(2, name).BindOptional(3, NullIfZero(sweep_id));
  stmt->BindOptional(4, NullIfZero(run_id)).Bind(5, text);
  if (actor.has_value()) {
    stmt->Bind(6, *actor);
  } else {
    stmt->BindNull(6);
  }
  return stmt->Run();
}

absl::StatusOr<std::vector<xmod::v1::Event>> LoadEvents(Db& db, const EventQuery& query) {
  absl::StatusOr<Stmt> stmt = db.Prepare(
      absl::StrCat("SELECT id, time_ms, kind, sweep_id, run_id, text, actor FROM events ",
                   WhereClause(query), " ORDER BY id DESC LIMIT ?"));
  if (!stmt.ok()) return stmt.status();
  BindQuery(query, *stmt);
  std::vector<xmod::v1::Event> events;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return events;
    events.push_back(EventOf(*stmt));
  }
}

absl::StatusOr<std::map<std::string, ActorChanges>> CountChangesByActor(Db& db, int64_t since_ms) {
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "SELECT e.actor, COUNT(*),"
      " SUM(e.kind <> ?2 AND s.submitter IS NOT NULL AND s.submitter <> e.actor)"
      " FROM events e LEFT JOIN sweeps s ON s.id = e.sweep_id"
      " WHERE e.actor IS NOT NULL AND e.time_ms >= ?1 GROUP BY e.actor");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, since_ms).Bind(2, EventKindName(xmod::v1::EVENT_RUN_PREEMPT_ORDERED));
  std::map<std::string, ActorChanges> out;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    ActorChanges& changes = out[stmt->Text(0)];
    changes.changes = static_cast<int>(stmt->Int(1));
    changes.to_others_work = static_cast<int>(stmt->Int(2));
  }
}

}  // namespace xmod
