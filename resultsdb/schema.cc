// Schema of the results database (docs/results-database.md). Each entry of kMigrations
// moves the database from version i to i + 1; never change what an entry executes once
// released, append a new one. A metric series is named as {series:NAME} (SERIES_NAME of
// xmod.v1.Series, whose strings never change), replaced by its string literal when it runs.
//
// Units: *_ms columns are Unix milliseconds; flops are training FLOPs; losses in nats.
// Run and attempt states are stored as their proto enum names ("QUEUED", "RUNNING", ...)
// so that users can query them by name. From version 3 a value that is not known yet or
// does not apply is NULL, never a 0 or '' that reads like a value.
#include "resultsdb/schema.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "resultsdb/sqlite_db.h"
#include "trainer_contract/series.h"

namespace xmod {
namespace {

constexpr const char* kMigrations[] = {
    // Version 1: the initial schema.
    R"sql(
CREATE TABLE sweeps (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  spec BLOB NOT NULL,                 -- xmod.v1.SweepSpec, binary
  priority INTEGER NOT NULL DEFAULT 0,
  cancelled INTEGER NOT NULL DEFAULT 0,
  created_ms INTEGER NOT NULL
);

CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
  label TEXT NOT NULL DEFAULT '',
  name TEXT NOT NULL,
  arch TEXT NOT NULL,                 -- Architecture enum name
  k INTEGER NOT NULL,
  a REAL NOT NULL,
  seq_len INTEGER NOT NULL,           -- L
  backbone TEXT NOT NULL,
  moe TEXT NOT NULL DEFAULT '',       -- "active:total+shared" for MOE
  flop_budget REAL NOT NULL,
  forward_flops_per_token REAL NOT NULL,
  total_params REAL NOT NULL,
  held_out INTEGER NOT NULL DEFAULT 0,
  priority INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL,                -- RunState enum name
  attempts INTEGER NOT NULL DEFAULT 0,      -- attempts started
  failures INTEGER NOT NULL DEFAULT 0,      -- lost or failed attempts since the last retry
  max_attempts INTEGER NOT NULL,
  not_before_ms INTEGER NOT NULL DEFAULT 0, -- retry backoff: not leased before this time
  error TEXT NOT NULL DEFAULT '',
  spec BLOB NOT NULL,                 -- xmod.v1.RunSpec, binary
  created_ms INTEGER NOT NULL,
  started_ms INTEGER NOT NULL DEFAULT 0,
  finished_ms INTEGER NOT NULL DEFAULT 0,
  -- progress, from metric reports and heartbeats
  step INTEGER NOT NULL DEFAULT 0,
  tokens INTEGER NOT NULL DEFAULT 0,
  flops_done REAL NOT NULL DEFAULT 0,
  train_loss REAL NOT NULL DEFAULT 0,
  val_loss REAL NOT NULL DEFAULT 0,
  tokens_per_second REAL NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_sweep ON runs(sweep_id);
CREATE INDEX runs_by_state ON runs(state);

CREATE TABLE workers (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  hostname TEXT NOT NULL DEFAULT '',
  version TEXT NOT NULL DEFAULT '',
  slots BLOB NOT NULL,                -- xmod.v1.RegisterRequest with only `slots` set
  registered_ms INTEGER NOT NULL,
  last_seen_ms INTEGER NOT NULL
);

CREATE TABLE attempts (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  attempt INTEGER NOT NULL,           -- from 1
  worker_id INTEGER NOT NULL,
  worker TEXT NOT NULL,
  slots TEXT NOT NULL DEFAULT '',     -- comma-separated Slot.index values
  started_ms INTEGER NOT NULL,
  ended_ms INTEGER NOT NULL DEFAULT 0,   -- 0 while open
  outcome TEXT NOT NULL DEFAULT 'running',
  exit_code INTEGER NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT '',
  resumed_from_step INTEGER NOT NULL DEFAULT 0,  -- 0 = fresh start
  lease_expires_ms INTEGER NOT NULL,
  PRIMARY KEY (run_id, attempt)
);

CREATE TABLE metrics (
  run_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  seq INTEGER NOT NULL,               -- the worker's consecutive number within the attempt
  step INTEGER NOT NULL,
  tokens INTEGER NOT NULL,
  flops REAL NOT NULL,
  name TEXT NOT NULL,
  value REAL NOT NULL,
  PRIMARY KEY (run_id, attempt, seq)
) WITHOUT ROWID;
CREATE INDEX metrics_by_name ON metrics(run_id, name, step);

CREATE TABLE checkpoints (
  run_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  step INTEGER NOT NULL,
  tokens INTEGER NOT NULL,
  flops REAL NOT NULL,
  path TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  PRIMARY KEY (run_id, attempt, step)
);

CREATE TABLE events (
  id INTEGER PRIMARY KEY,
  time_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,                 -- an xmod.v1.EventKind's event_kind_name
  sweep_id INTEGER,
  run_id INTEGER,
  text TEXT NOT NULL DEFAULT ''
);

-- Scaling-law fits (issue 4): written by the fitter, one row per fit attempt.
CREATE TABLE fits (
  id INTEGER PRIMARY KEY,
  sweep_id INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  params TEXT NOT NULL DEFAULT '{}',  -- JSON of xmod.v1.LawParams
  r2 REAL, rmse REAL, mae REAL,
  n_obs INTEGER NOT NULL DEFAULT 0,
  cv TEXT NOT NULL DEFAULT '[]',      -- JSON list of xmod.v1.GroupError
  fit BLOB,                           -- xmod.v1.Fit, binary (every field)
  error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX fits_by_sweep ON fits(sweep_id, id);

-- Metric rows that count: a row of attempt n is superseded when a later attempt of the
-- same run resumed from a step before it (or started afresh, resumed_from_step = 0).
CREATE VIEW canonical_metrics AS
SELECT m.* FROM metrics m
WHERE NOT EXISTS (
  SELECT 1 FROM attempts b
  WHERE b.run_id = m.run_id AND b.attempt > m.attempt
    AND (b.resumed_from_step = 0 OR m.step > b.resumed_from_step));

-- One row per run: configuration, state and outcome.
CREATE VIEW run_summary AS
SELECT r.id AS run_id, r.sweep_id, r.name, r.arch, r.k, r.a, r.seq_len AS l, r.backbone,
       r.state, r.attempts, r.flop_budget, r.flops_done,
       (SELECT c.value FROM canonical_metrics c
         WHERE c.run_id = r.id AND c.name = {series:VAL_LOSS}
         ORDER BY c.step DESC, c.attempt DESC LIMIT 1) AS final_val_loss,
       r.train_loss, r.tokens_per_second, r.held_out, r.total_params,
       r.forward_flops_per_token
FROM runs r;

-- Validation loss against training FLOPs, per run, with the run's configuration: the
-- input of the scaling-law fit (dense curves are interpolated at equal FLOPs).
CREATE VIEW flop_aligned_loss AS
SELECT r.sweep_id, r.id AS run_id, r.name, r.arch, r.k, r.a, r.seq_len AS l, r.backbone,
       r.held_out, c.step, c.tokens, c.flops, c.value AS val_loss
FROM canonical_metrics c JOIN runs r ON r.id = c.run_id
WHERE c.name = {series:VAL_LOSS};
)sql",
    // Version 2: studies, one fit over several sweeps. A study's fits rows have
    // study_id set and sweep_id 0.
    R"sql(
CREATE TABLE studies (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  spec BLOB NOT NULL,                 -- xmod.v1.StudySpec, binary, members resolved
  created_ms INTEGER NOT NULL
);

-- The member sweeps of each study, in the spec's order, with their B.4 role.
CREATE TABLE study_members (
  study_id INTEGER NOT NULL REFERENCES studies(id),
  position INTEGER NOT NULL,
  sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
  role TEXT NOT NULL,                 -- 'kxl', 'nact', 'axk' or 'design'
  PRIMARY KEY (study_id, position)
);
CREATE INDEX study_members_by_sweep ON study_members(sweep_id);

ALTER TABLE fits ADD COLUMN study_id INTEGER REFERENCES studies(id);
CREATE INDEX fits_by_study ON fits(study_id, id);
)sql",
    // Version 3: NULL, not 0 or '', for what is not known yet or does not apply. SQLite
    // cannot drop NOT NULL from a column, so runs, attempts and fits are rebuilt (create,
    // copy, drop, rename; the views over them are dropped first and made again unchanged),
    // and the copy turns the old placeholders into NULL: a run's start, end, losses and
    // throughput before they exist, A of an architecture without anchors, the MoE column of
    // other architectures; an attempt's end and exit code while it is open, and the exit
    // code of a lost attempt (no exit was seen); a study fit's sweep_id; a failed fit's
    // params, n_obs and cv.
    R"sql(
DROP VIEW flop_aligned_loss;
DROP VIEW run_summary;
DROP VIEW canonical_metrics;

CREATE TABLE runs_v3 (
  id INTEGER PRIMARY KEY,
  sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
  label TEXT NOT NULL DEFAULT '',
  name TEXT NOT NULL,
  arch TEXT NOT NULL,                 -- Architecture enum name
  k INTEGER NOT NULL,
  a REAL,                             -- NULL: the architecture has no anchor stride
  seq_len INTEGER NOT NULL,           -- L
  backbone TEXT NOT NULL,
  moe TEXT,                           -- "active:total+shared" for MOE, else NULL
  flop_budget REAL NOT NULL,
  forward_flops_per_token REAL NOT NULL,
  total_params REAL NOT NULL,
  held_out INTEGER NOT NULL DEFAULT 0,
  priority INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL,                -- RunState enum name
  attempts INTEGER NOT NULL DEFAULT 0,      -- attempts started
  failures INTEGER NOT NULL DEFAULT 0,      -- lost or failed attempts since the last retry
  max_attempts INTEGER NOT NULL,
  not_before_ms INTEGER NOT NULL DEFAULT 0, -- retry backoff: not leased before this time
  error TEXT NOT NULL DEFAULT '',
  spec BLOB NOT NULL,                 -- xmod.v1.RunSpec, binary
  created_ms INTEGER NOT NULL,
  started_ms INTEGER,                 -- NULL until the first attempt starts
  finished_ms INTEGER,                -- NULL until SUCCEEDED, FAILED or CANCELLED
  -- progress, from metric reports and heartbeats; NULL until first reported
  step INTEGER NOT NULL DEFAULT 0,
  tokens INTEGER NOT NULL DEFAULT 0,
  flops_done REAL NOT NULL DEFAULT 0,
  train_loss REAL,
  val_loss REAL,
  tokens_per_second REAL
);
INSERT INTO runs_v3
SELECT id, sweep_id, label, name, arch, k, NULLIF(a, 0), seq_len, backbone, NULLIF(moe, ''),
       flop_budget, forward_flops_per_token, total_params, held_out, priority, state,
       attempts, failures, max_attempts, not_before_ms, error, spec, created_ms,
       NULLIF(started_ms, 0), NULLIF(finished_ms, 0), step, tokens, flops_done,
       NULLIF(train_loss, 0), NULLIF(val_loss, 0), NULLIF(tokens_per_second, 0)
FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v3 RENAME TO runs;
CREATE INDEX runs_by_sweep ON runs(sweep_id);
CREATE INDEX runs_by_state ON runs(state);

CREATE TABLE attempts_v3 (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  attempt INTEGER NOT NULL,           -- from 1
  worker_id INTEGER NOT NULL,
  worker TEXT NOT NULL,
  slots TEXT NOT NULL DEFAULT '',     -- comma-separated Slot.index values
  started_ms INTEGER NOT NULL,
  ended_ms INTEGER,                   -- NULL while open
  outcome TEXT NOT NULL DEFAULT 'running',
  exit_code INTEGER,                  -- NULL while open, and for a lost attempt
  error TEXT NOT NULL DEFAULT '',
  resumed_from_step INTEGER NOT NULL DEFAULT 0,  -- 0 = fresh start
  lease_expires_ms INTEGER NOT NULL,
  PRIMARY KEY (run_id, attempt)
);
INSERT INTO attempts_v3
SELECT run_id, attempt, worker_id, worker, slots, started_ms, NULLIF(ended_ms, 0), outcome,
       CASE WHEN ended_ms = 0 OR outcome = 'lost' THEN NULL ELSE exit_code END, error,
       resumed_from_step, lease_expires_ms
FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_v3 RENAME TO attempts;

CREATE TABLE fits_v3 (
  id INTEGER PRIMARY KEY,
  sweep_id INTEGER REFERENCES sweeps(id),  -- NULL for a study's fit
  created_ms INTEGER NOT NULL,
  params TEXT,                        -- JSON of xmod.v1.LawParams; NULL on error
  r2 REAL, rmse REAL, mae REAL,       -- NULL on error
  n_obs INTEGER,                      -- NULL on error
  cv TEXT,                            -- JSON list of xmod.v1.GroupError; NULL on error
  fit BLOB,                           -- xmod.v1.Fit, binary (every field); NULL on error
  error TEXT NOT NULL DEFAULT '',
  study_id INTEGER REFERENCES studies(id)  -- NULL for a sweep's fit
);
INSERT INTO fits_v3
SELECT id, NULLIF(sweep_id, 0), created_ms, CASE WHEN error = '' THEN params END, r2, rmse,
       mae, CASE WHEN error = '' THEN n_obs END, CASE WHEN error = '' THEN cv END, fit, error,
       study_id
FROM fits;
DROP TABLE fits;
ALTER TABLE fits_v3 RENAME TO fits;
CREATE INDEX fits_by_sweep ON fits(sweep_id, id);
CREATE INDEX fits_by_study ON fits(study_id, id);

CREATE VIEW canonical_metrics AS
SELECT m.* FROM metrics m
WHERE NOT EXISTS (
  SELECT 1 FROM attempts b
  WHERE b.run_id = m.run_id AND b.attempt > m.attempt
    AND (b.resumed_from_step = 0 OR m.step > b.resumed_from_step));

CREATE VIEW run_summary AS
SELECT r.id AS run_id, r.sweep_id, r.name, r.arch, r.k, r.a, r.seq_len AS l, r.backbone,
       r.state, r.attempts, r.flop_budget, r.flops_done,
       (SELECT c.value FROM canonical_metrics c
         WHERE c.run_id = r.id AND c.name = {series:VAL_LOSS}
         ORDER BY c.step DESC, c.attempt DESC LIMIT 1) AS final_val_loss,
       r.train_loss, r.tokens_per_second, r.held_out, r.total_params,
       r.forward_flops_per_token
FROM runs r;

CREATE VIEW flop_aligned_loss AS
SELECT r.sweep_id, r.id AS run_id, r.name, r.arch, r.k, r.a, r.seq_len AS l, r.backbone,
       r.held_out, c.step, c.tokens, c.flops, c.value AS val_loss
FROM canonical_metrics c JOIN runs r ON r.id = c.run_id
WHERE c.name = {series:VAL_LOSS};
)sql",
    // Version 4: law-guided designs (docs/adaptive-design.md): the live matched-FLOP Δ of
    // sparse runs, runs stopped early (censored observations), and the decisions of
    // adaptive sweeps and ProposeRuns with their ranked proposals.
    R"sql(
CREATE TABLE live_delta (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  flops REAL NOT NULL,                -- the sparse run's evaluation mark (training FLOPs)
  delta REAL NOT NULL,                -- val/loss minus the dense reference's at these FLOPs
  sparse_loss REAL NOT NULL,
  dense_loss REAL NOT NULL,           -- the reference, interpolated, never extrapolated
  PRIMARY KEY (run_id, flops)
) WITHOUT ROWID;

CREATE TABLE censored_runs (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id),
  flops REAL NOT NULL,                -- where it was stopped (its last live-Δ mark)
  live_delta REAL NOT NULL,           -- its live Δ there
  reason TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);

CREATE TABLE design_decisions (
  id INTEGER PRIMARY KEY,
  sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
  created_ms INTEGER NOT NULL,
  source TEXT NOT NULL,               -- 'adaptive' (the coordinator) or 'propose' (a user)
  stop INTEGER NOT NULL,              -- 1: the design is finished
  stop_reason TEXT,                   -- NULL unless stop
  compute_spent REAL NOT NULL,        -- training FLOPs of runs done or in flight
  compute_budget REAL,                -- NULL: no budget given
  observations INTEGER NOT NULL,      -- configurations the decision's fit saw
  decision BLOB NOT NULL              -- xmod.v1.DesignDecision, binary (every field)
);
CREATE INDEX design_decisions_by_sweep ON design_decisions(sweep_id, id);

CREATE TABLE design_proposals (
  decision_id INTEGER NOT NULL REFERENCES design_decisions(id),
  rank INTEGER NOT NULL,              -- 1 = best
  backbone TEXT NOT NULL,
  seq_len INTEGER NOT NULL,
  k INTEGER NOT NULL,                 -- 1: a dense run (a seed set's reference)
  a REAL NOT NULL,
  flops REAL NOT NULL,                -- the run's budget
  needs_dense INTEGER NOT NULL,       -- 1: its dense reference was queued with it
  cost_flops REAL NOT NULL,
  value REAL NOT NULL,                -- expected reduction of the targets' regret (nats)
  score REAL NOT NULL,                -- value per 1e18 FLOPs of cost
  reason TEXT NOT NULL,
  run_id INTEGER REFERENCES runs(id), -- the run queued for it; NULL when not queued
  PRIMARY KEY (decision_id, rank)
);
)sql",
    // Version 5: the rendezvous address a gang attempt was given (so a restarted
    // coordinator never hands a running gang's port to another), and the coordinator's
    // counters that must survive its restarts (lost leases, out-of-memory exits).
    R"sql(
ALTER TABLE attempts ADD COLUMN rendezvous TEXT;  -- "tcp://host:port"; NULL unless a gang
CREATE TABLE counters (
  name TEXT PRIMARY KEY,              -- e.g. 'leases_lost', 'oom_exits'
  value INTEGER NOT NULL
) WITHOUT ROWID;
)sql",
    // Version 6: a gang's members as rows of their own (docs/results-database.md,
    // "attempt_members"), back-filled from the attempts written before: their worker
    // column lists the members' names comma-separated (member 0 first, whose id is
    // attempts.worker_id; the others' ids are looked up by name) and their slots column
    // each member's slot indices, the members ';'-separated ("0,1;0,1").
    R"sql(
CREATE TABLE attempt_members (
  run_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  member INTEGER NOT NULL,            -- 0, 1, ...: member 0 runs rank 0
  worker_id INTEGER REFERENCES workers(id),  -- NULL: no worker of that name is known
  worker TEXT NOT NULL,               -- the worker's name
  slots TEXT NOT NULL,                -- its slot indices, a JSON array: [0,1]
  PRIMARY KEY (run_id, attempt, member),
  FOREIGN KEY (run_id, attempt) REFERENCES attempts(run_id, attempt)
) WITHOUT ROWID;
INSERT INTO attempt_members (run_id, attempt, member, worker_id, worker, slots)
WITH RECURSIVE split(run_id, attempt, member, worker_id, worker, slots, names_left,
                     slots_left) AS (
  SELECT run_id, attempt, -1, worker_id, '', '', worker || ',', slots || ';' FROM attempts
  UNION ALL
  SELECT run_id, attempt, member + 1, worker_id,
         substr(names_left, 1, instr(names_left, ',') - 1),
         substr(slots_left, 1, instr(slots_left, ';') - 1),
         substr(names_left, instr(names_left, ',') + 1),
         substr(slots_left, instr(slots_left, ';') + 1)
  FROM split WHERE names_left <> ''
)
SELECT run_id, attempt, member,
       CASE WHEN member = 0 THEN worker_id
            ELSE (SELECT w.id FROM workers w WHERE w.name = split.worker) END,
       worker, '[' || slots || ']'
FROM split WHERE member >= 0;
)sql",

    // 7: runs two member sweeps of a study share (docs/paper-fidelity.md, "B.4 as a study"):
    // a later member's run of the same configuration as an earlier member's is not trained;
    // the earlier one is, and the study's fit counts it in both roles.
    R"sql(
CREATE TABLE shared_runs (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id),
  trained_run_id INTEGER NOT NULL REFERENCES runs(id),
  study_id INTEGER NOT NULL REFERENCES studies(id),
  created_ms INTEGER NOT NULL
);
CREATE INDEX shared_runs_by_trained_run ON shared_runs(trained_run_id);
)sql",

    // Version 8: a cluster shared by a lab (docs/operations.md, "Sharing a cluster"): who
    // submitted each sweep (the credential name), runs that must not be displaced, the
    // PREEMPT order an open attempt is under, and each attempt member's slot kind and cores
    // for the usage accounting of `xmodctl usage`.
    R"sql(
ALTER TABLE sweeps ADD COLUMN submitter TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN preemptible INTEGER NOT NULL DEFAULT 1;
ALTER TABLE attempts ADD COLUMN preempt_reason TEXT;
ALTER TABLE attempt_members ADD COLUMN slot_kind TEXT;
ALTER TABLE attempt_members ADD COLUMN cores INTEGER;
)sql",

    // Version 9: tenants (docs/security.md, "What each scope may do"): who made each change
    // (the acting credential of an event; NULL when the coordinator acted on its own), who
    // created each study (NULL for studies stored before), and indexes for reading a sweep's,
    // a run's and a credential's events.
    R"sql(
ALTER TABLE events ADD COLUMN actor TEXT;
ALTER TABLE studies ADD COLUMN owner TEXT;
CREATE INDEX events_by_sweep ON events(sweep_id, id);
CREATE INDEX events_by_run ON events(run_id, id);
CREATE INDEX events_by_actor ON events(actor, time_ms) WHERE actor IS NOT NULL;
)sql",

    // Version 10: GPU use (docs/operations.md, "Monitoring"): the most device memory each
    // attempt member held on one GPU, as its worker measured it with NVML (NULL: not measured).
    R"sql(
ALTER TABLE attempt_members ADD COLUMN peak_gpu_memory_bytes INTEGER;
)sql",

    // Version 11: out of memory (docs/fault-tolerance.md, "Out of memory"): each run's
    // out-of-memory failures since submission or its last resume, which choose the memory
    // plan of its next attempt, and what that plan changed in each attempt's spec (NULL: the
    // spec as submitted).
    R"sql(
ALTER TABLE runs ADD COLUMN oom_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN memory_plan TEXT;
)sql",

    // Version 12: planner statistics for the metric points (docs/results-database.md,
    // "Query plans"). Without any, SQLite reads one series of a run (canonical_metrics with
    // a name) through the primary key, i.e. every point of the run. These rows, in the form
    // ANALYZE writes, describe a large sweep: 10M points, 20,000 per run, 2,000 per series.
    // ANALYZE sqlite_schema makes the table without analyzing anything; an ANALYZE run later
    // by an operator replaces the rows with measured ones.
    R"sql(
ANALYZE sqlite_schema;
DELETE FROM sqlite_stat1 WHERE tbl = 'metrics';
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
  ('metrics', 'metrics', '10000000 20000 20000 1'),
  ('metrics', 'metrics_by_name', '10000000 20000 2000 1 1 1');
)sql",
};

constexpr int kMigrationCount = sizeof(kMigrations) / sizeof(kMigrations[0]);
static_assert(kMigrationCount == kSchemaVersion, "one migration per schema version");

// A migration's SQL with each {series:NAME} replaced by the string literal of SERIES_NAME's
// name (trainer_contract/series.h): the views name metric series through their one
// definition.
std::string WithSeriesNames(const char* migration) {
  std::vector<std::pair<std::string, std::string>> replacements;
  for (const auto& [value, name] : AllSeries()) {
    replacements.emplace_back(absl::StrCat("{series:", value, "}"), SqlString(name));
  }
  return absl::StrReplaceAll(migration, replacements);
}

}  // namespace

absl::StatusOr<int> SchemaVersion(Db& db) {
  absl::StatusOr<Stmt> stmt = db.Prepare("PRAGMA user_version");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return static_cast<int>(stmt->Int(0));
}

absl::Status MigrateTo(Db& db, int target) {
  if (target < 1 || target > kSchemaVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema version ", target, ": must be in [1, ", kSchemaVersion, "]"));
  }
  if (absl::Status s = db.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  absl::StatusOr<int> version = SchemaVersion(db);
  absl::Status status = version.status();
  if (status.ok() && *version > target) {
    status = absl::FailedPreconditionError(absl::StrCat(
        "database schema version ", *version, " is newer than this coordinator's ", target));
  }
  for (int v = status.ok() ? *version : target; status.ok() && v < target; ++v) {
    status = db.Exec(WithSeriesNames(kMigrations[v]));
    if (status.ok()) status = db.Exec(absl::StrCat("PRAGMA user_version = ", v + 1));
  }
  if (!status.ok()) {
    db.Exec("ROLLBACK").IgnoreError();
    return status;
  }
  return db.Exec("COMMIT");
}

absl::Status Migrate(Db& db) { return MigrateTo(db, kSchemaVersion); }

}  // namespace xmod
