// Schema of the coordinator database (docs/design.md, "Storage"). Each entry of
// kMigrations moves the database from version i to i + 1; never edit an entry once
// released, append a new one.
//
// Units: *_ms columns are Unix milliseconds; flops are training FLOPs; losses in nats.
// Run and attempt states are stored as their proto enum names ("QUEUED", "RUNNING", ...)
// so that users can query them by name.
#include "coordinator/schema.h"

#include "absl/strings/str_cat.h"

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
  kind TEXT NOT NULL,                 -- e.g. "sweep_submitted", "attempt_lost"
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
         WHERE c.run_id = r.id AND c.name = 'val/loss'
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
WHERE c.name = 'val/loss';
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
};

constexpr int kMigrationCount = sizeof(kMigrations) / sizeof(kMigrations[0]);
static_assert(kMigrationCount == kSchemaVersion, "one migration per schema version");

}  // namespace

absl::StatusOr<int> SchemaVersion(Db& db) {
  absl::StatusOr<Stmt> stmt = db.Prepare("PRAGMA user_version");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return static_cast<int>(stmt->Int(0));
}

absl::Status Migrate(Db& db) {
  if (absl::Status s = db.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  absl::StatusOr<int> version = SchemaVersion(db);
  absl::Status status = version.status();
  if (status.ok() && *version > kSchemaVersion) {
    status = absl::FailedPreconditionError(absl::StrCat("database schema version ", *version,
                                                        " is newer than this coordinator's ",
                                                        kSchemaVersion));
  }
  for (int v = status.ok() ? *version : kSchemaVersion; status.ok() && v < kSchemaVersion; ++v) {
    status = db.Exec(kMigrations[v]);
    if (status.ok()) status = db.Exec(absl::StrCat("PRAGMA user_version = ", v + 1));
  }
  if (!status.ok()) {
    db.Exec("ROLLBACK").IgnoreError();
    return status;
  }
  return db.Exec("COMMIT");
}

}  // namespace xmod
