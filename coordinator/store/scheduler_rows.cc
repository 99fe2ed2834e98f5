// See scheduler_rows.h.
#include "coordinator/store/scheduler_rows.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/store/row_loop.h"
#include "coordinator/store/store_reads.h"

namespace xmod {
namespace {

xmod::v1::RunState ParseRunState(const std::string& name) {
  xmod::v1::RunState state = xmod::v1::RUN_STATE_UNSPECIFIED;
  xmod::v1::RunState_Parse(name, &state);
  return state;
}

// Runs QUEUED or RUNNING, and runs with an open attempt, with their latest checkpoints.
absl::Status LoadLiveRuns(Db& db, std::vector<RunQueueEntry>* runs) {
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "SELECT id, sweep_id, priority, state, attempts, failures, max_attempts, not_before_ms,"
      " name, spec, oom_failures FROM runs WHERE state IN ('QUEUED','RUNNING') OR id IN"
      " (SELECT run_id FROM attempts WHERE ended_ms IS NULL) ORDER BY id");
  if (!stmt.ok()) return stmt.status();
  absl::Status read = ForEachRow(*stmt, [runs](const Stmt& s) {
    RunQueueEntry& e = runs->emplace_back();
    e.run_id = s.Int(0);
    e.sweep_id = s.Int(1);
    e.priority = static_cast<int>(s.Int(2));
    e.state = ParseRunState(s.Text(3));
    e.attempts = static_cast<int>(s.Int(4));
    e.failures = static_cast<int>(s.Int(5));
    e.max_attempts = static_cast<int>(s.Int(6));
    e.not_before_ms = s.Int(7);
    e.name = s.Text(8);
    e.spec.ParseFromString(s.Text(9));
    e.oom_failures = static_cast<int>(s.Int(10));
  });
  if (!read.ok()) return read;
  for (RunQueueEntry& e : *runs) {
    absl::StatusOr<std::optional<xmod::v1::Checkpoint>> c = LatestCheckpoint(db, e.run_id);
    if (!c.ok()) return c.status();
    e.latest_checkpoint = *c;
  }
  return absl::OkStatus();
}

// The members of the open attempts, into `attempts` (keyed by run and attempt).
absl::Status LoadOpenMembers(Db& db, std::map<std::pair<int64_t, int>, OpenAttempt>* attempts) {
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "SELECT m.run_id, m.attempt, m.member, m.worker_id, m.worker, s.value"
      " FROM attempt_members m JOIN attempts a ON a.run_id = m.run_id AND a.attempt = m.attempt"
      " LEFT JOIN json_each(m.slots) s WHERE a.ended_ms IS NULL"
      " ORDER BY m.run_id, m.attempt, m.member, s.key");
  if (!stmt.ok()) return stmt.status();
  return ForEachRow(*stmt, [attempts](const Stmt& s) {
    auto it = attempts->find({s.Int(0), static_cast<int>(s.Int(1))});
    if (it == attempts->end()) return;
    std::vector<AttemptMemberRow>& members = it->second.members;
    const size_t member = static_cast<size_t>(s.Int(2));
    if (members.size() <= member) {
      AttemptMemberRow& row = members.emplace_back();
      row.worker_id = s.IsNull(3) ? 0 : s.Int(3);
      row.worker = s.Text(4);
    }
    if (!s.IsNull(5)) members.back().slots.push_back(static_cast<int32_t>(s.Int(5)));
  });
}

absl::Status LoadOpenAttempts(Db& db, std::vector<OpenAttempt>* open) {
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "SELECT a.run_id, a.attempt, a.lease_expires_ms,"
      " (SELECT MAX(seq) FROM metrics m WHERE m.run_id = a.run_id AND m.attempt = a.attempt),"
      " a.rendezvous FROM attempts a WHERE a.ended_ms IS NULL ORDER BY a.run_id, a.attempt");
  if (!stmt.ok()) return stmt.status();
  std::map<std::pair<int64_t, int>, OpenAttempt> attempts;
  absl::Status read = ForEachRow(*stmt, [&attempts](const Stmt& s) {
    OpenAttempt a;
    a.run_id = s.Int(0);
    a.attempt = static_cast<int>(s.Int(1));
    a.lease_expires_ms = s.Int(2);
    a.max_seq = s.IsNull(3) ? -1 : s.Int(3);
    a.rendezvous = s.Text(4);
    attempts[{a.run_id, a.attempt}] = std::move(a);
  });
  if (!read.ok()) return read;
  if (absl::Status s = LoadOpenMembers(db, &attempts); !s.ok()) return s;
  for (auto& [key, attempt] : attempts) open->push_back(std::move(attempt));
  return absl::OkStatus();
}

absl::Status LoadWorkerRows(Db& db, std::vector<WorkerRow>* workers) {
  absl::StatusOr<Stmt> stmt = db.Prepare("SELECT id, name, slots, last_seen_ms FROM workers");
  if (!stmt.ok()) return stmt.status();
  return ForEachRow(*stmt, [workers](const Stmt& s) {
    WorkerRow& w = workers->emplace_back();
    w.id = s.Int(0);
    w.name = s.Text(1);
    xmod::v1::RegisterRequest slots;
    slots.ParseFromString(s.Text(2));
    w.slots.assign(slots.slots().begin(), slots.slots().end());
    w.last_seen_ms = s.Int(3);
    w.advertise_host = slots.advertise_host();
    w.rendezvous_port_first = slots.rendezvous_port_first();
    w.rendezvous_port_last = slots.rendezvous_port_last();
  });
}

absl::Status LoadCounters(Db& db, std::map<std::string, int64_t>* counters) {
  absl::StatusOr<Stmt> stmt = db.Prepare("SELECT name, value FROM counters");
  if (!stmt.ok()) return stmt.status();
  return ForEachRow(*stmt, [counters](const Stmt& s) { (*counters)[s.Text(0)] = s.Int(1); });
}

}  // namespace

std::string JoinedMemberNames(const std::vector<AttemptMemberRow>& members) {
  return absl::StrJoin(members, ",",
                       [](std::string* out, const AttemptMemberRow& m) { out->append(m.worker); });
}

absl::Status InsertAttemptWithMembers(Db& db, AttemptStart start,
                                      const std::vector<AttemptMemberRow>& members) {
  start.worker_id = members.front().worker_id;
  start.worker = JoinedMemberNames(members);
  start.slots = absl::StrJoin(members, ";", [](std::string* out, const AttemptMemberRow& m) {
    out->append(absl::StrJoin(m.slots, ","));
  });
  if (absl::Status s = InsertAttempt(db, start); !s.ok()) return s;
  absl::StatusOr<Stmt> stmt = db.Prepare(
      "INSERT INTO attempt_members (run_id, attempt, member, worker_id, worker, slots)"
      " VALUES (?,?,?,?,?,?)");
  if (!stmt.ok()) return stmt.status();
  for (size_t m = 0; m < members.size(); ++m) {
    stmt->Reset();
    stmt->Bind(1, start.run_id)
        .Bind(2, start.attempt)
        .Bind(3, static_cast<int64_t>(m))
        .Bind(4, members[m].worker_id)
        .Bind(5, members[m].worker)
        .Bind(6, absl::StrCat("[", absl::StrJoin(members[m].slots, ","), "]"));
    if (absl::Status s = stmt->Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckSweepOpen(Db& db, int64_t sweep_id) {
  absl::StatusOr<Stmt> sweep = db.Prepare("SELECT cancelled FROM sweeps WHERE id = ?");
  if (!sweep.ok()) return sweep.status();
  absl::StatusOr<bool> row = sweep->Bind(1, sweep_id).Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::NotFoundError(absl::StrCat("sweep ", sweep_id, " does not exist"));
  if (sweep->Int(0) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("sweep ", sweep_id, " was cancelled"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SchedulerSnapshot> LoadSchedulerSnapshot(Db& db) {
  SchedulerSnapshot snap;
  if (absl::Status s = LoadLiveRuns(db, &snap.runs); !s.ok()) return s;
  if (absl::Status s = LoadOpenAttempts(db, &snap.open_attempts); !s.ok()) return s;
  if (absl::Status s = LoadWorkerRows(db, &snap.workers); !s.ok()) return s;
  if (absl::Status s = LoadCounters(db, &snap.counters); !s.ok()) return s;
  return snap;
}

}  // namespace xmod
