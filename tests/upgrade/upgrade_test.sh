#!/usr/bin/env bash
# Upgrades with real data (docs/operations.md, "Upgrade"): the database that schema version
# V's own code wrote (tests/upgrade/fixtures/vV, made by make_fixture.sh; README.md says
# how) is opened by today's xmod-coordinator, in a copy laid out as it was made (the
# database and the checkpoint root side by side; the fixture's checkpoint paths are relative
# to the daemons' working directory). The coordinator must migrate it to today's schema
# version; every row of every old table must still be there, with the values the old code
# wrote (the NULL of version 3 in place of the old placeholders; only the columns that the
# unfinished run's resumption changes left out); xmodctl must show every sweep and list its
# runs; and a worker with fake_train must resume the unfinished run from its newest
# recorded checkpoint to SUCCEEDED. Every wait polls for a state against a deadline.
# Needs XMOD_BIN_DIR, XMOD_SOURCE_DIR and XMOD_FAKE_TRAIN.
#
#   upgrade_test.sh V
source "$(dirname "$0")/../lib/cluster.sh"
V=${1:?usage: upgrade_test.sh V}
: "${XMOD_SOURCE_DIR:?}" "${XMOD_FAKE_TRAIN:?}"
FIXTURE=$XMOD_SOURCE_DIR/tests/upgrade/fixtures/v$V
STARTED=$SECONDS

fail() {
  echo "upgrade_test v$V: FAIL: $*" >&2
  local log
  for log in "$TEST_TMP"/*.log "$TEST_TMP"/w-upgrade/run-*/train.log; do
    [ -f "$log" ] || continue
    echo "--- $log (tail)" >&2
    tail -n 30 "$log" >&2
  done
  exit 1
}

old() { sqlite3 -readonly "$TEST_TMP/before.db" "$@"; }
new() { sqlite3 -readonly "$TEST_TMP/xmod.db" "$@"; }

# wait_new SECONDS QUERY: until QUERY on today's database prints 1.
wait_new() {
  local deadline=$((SECONDS + $1))
  until [ "$(new "$2" 2>/dev/null)" = 1 ]; do
    ((SECONDS < deadline)) || fail "timed out after $1 s waiting for: $2"
    sleep 0.3
  done
}

# --- the fixture as it was made ----------------------------------------------------------------
cd "$TEST_TMP"
gunzip -c "$FIXTURE/xmod.db.gz" >xmod.db
cp xmod.db before.db  # the old database, untouched, to compare with
[ ! -d "$FIXTURE/checkpoints" ] || cp -r "$FIXTURE/checkpoints" checkpoints
[ "$(old 'PRAGMA user_version')" = "$V" ] || fail "the fixture is of version $(old 'PRAGMA user_version')"
# Its MANIFEST's row counts are the database's.
while read -r _ table count; do
  [ "$(old "SELECT count(*) FROM \"$table\"")" = "$count" ] ||
    fail "MANIFEST: $count rows of $table, the fixture has $(old "SELECT count(*) FROM \"$table\"")"
done < <(grep '^rows: ' "$FIXTURE/MANIFEST")
RUN=$(old "SELECT id FROM runs WHERE state IN ('QUEUED', 'RUNNING')")
[[ "$RUN" =~ ^[0-9]+$ ]] || fail "not exactly one unfinished run: '$RUN'"
IFS='|' read -r CKPT_STEP CKPT_PATH CKPT_SHA < <(old \
  "SELECT step, path, sha256 FROM checkpoints WHERE run_id = $RUN ORDER BY step DESC LIMIT 1")
[ -n "$CKPT_PATH" ] || fail "run $RUN has no checkpoint"
OLD_ATTEMPTS=$(old "SELECT max(attempt) FROM attempts WHERE run_id = $RUN")
TABLES=$(old "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")

# --- today's coordinator on it -----------------------------------------------------------------
TODAY=$(sed -n 's/.*kSchemaVersion = \([0-9]*\);.*/\1/p' "$XMOD_SOURCE_DIR/resultsdb/schema.h")
# As the fixture was made: the checkpoint root relative to the daemons' working directory.
CHECKPOINT_ROOT=checkpoints start_coordinator --lease_ttl_ms=3000 --heartbeat_interval_ms=500
[ "$(new 'PRAGMA user_version')" = "$TODAY" ] ||
  fail "schema version $(new 'PRAGMA user_version') after the start, not $TODAY"
echo "v$V: migrated to version $TODAY; unfinished run $RUN, checkpoint step $CKPT_STEP"

# xmodctl reads every sweep and every run of it.
"$XMOD_BIN_DIR/xmodctl" sweep list >sweeps.txt || fail "xmodctl sweep list"
for sweep in $(old "SELECT id FROM sweeps ORDER BY id"); do
  name=$(old "SELECT name FROM sweeps WHERE id = $sweep")
  "$XMOD_BIN_DIR/xmodctl" sweep show "$sweep" >show.txt 2>&1 || fail "xmodctl sweep show $sweep"
  grep -q "$name" show.txt || fail "xmodctl sweep show $sweep does not name $name"
  grep -q "$name" sweeps.txt || fail "xmodctl sweep list does not list $name"
  "$XMOD_BIN_DIR/xmodctl" runs list --sweep "$sweep" --output csv >runs.csv ||
    fail "xmodctl runs list --sweep $sweep"
  for id in $(old "SELECT id FROM runs WHERE sweep_id = $sweep"); do
    grep -q "^$id," runs.csv || fail "xmodctl runs list --sweep $sweep lacks run $id"
  done
done
"$XMOD_BIN_DIR/xmodctl" run show "$RUN" >/dev/null || fail "xmodctl run show $RUN"

# --- the unfinished run resumes from its checkpoint --------------------------------------------
# Its open attempt (if any) is lost once one lease TTL has passed without its worker; the run
# is queued again and placed on this worker, whose trainer continues after the checkpoint.
FAKE_TRAIN_MODE=ok FAKE_TRAIN_RESUME=1 FAKE_TRAIN_STEPS=$((CKPT_STEP + 3)) \
  start_worker w-upgrade --train_bin="$XMOD_FAKE_TRAIN"
wait_new 120 "SELECT state = 'SUCCEEDED' FROM runs WHERE id = $RUN"
IFS='|' read -r attempt resumed outcome < <(new \
  "SELECT attempt, resumed_from_step, outcome FROM attempts WHERE run_id = $RUN
   ORDER BY attempt DESC LIMIT 1")
((attempt > OLD_ATTEMPTS)) || fail "no new attempt of run $RUN"
[ "$outcome" = succeeded ] || fail "attempt $attempt of run $RUN: $outcome"
[ "$resumed" = "$CKPT_STEP" ] || fail "attempt $attempt resumed from step $resumed, not $CKPT_STEP"
log=w-upgrade/run-$RUN-a$attempt/train.log
grep -q -- "--resume $CKPT_PATH" "$log" || fail "$log: not started with --resume $CKPT_PATH"
[ "$(sha256sum "$CKPT_PATH" | cut -d' ' -f1)" = "$CKPT_SHA" ] ||
  fail "$CKPT_PATH does not match its recorded digest"
[ "$(new "SELECT min(step) FROM metrics WHERE run_id = $RUN AND attempt = $attempt")" = \
  $((CKPT_STEP + 1)) ] || fail "attempt $attempt did not continue at step $((CKPT_STEP + 1))"
new "SELECT count(*) FROM attempts WHERE run_id = $RUN AND outcome = 'running'" | grep -qx 0 ||
  fail "run $RUN still has an open attempt"
echo "v$V: run $RUN resumed from step $CKPT_STEP as attempt $attempt and succeeded"
stop_pids 30 "${PIDS[@]:1}"  # the worker (the coordinator is PIDS[0])

# --- every old row is still there --------------------------------------------------------------
# Columns the unfinished run's resumption changes, on its rows only (table: run key, columns).
declare -A RUN_KEY=([runs]=id [attempts]=run_id)
declare -A CHANGED=(
  [runs]="state attempts failures not_before_ms error started_ms finished_ms step tokens
          flops_done train_loss val_loss tokens_per_second"
  [attempts]="ended_ms outcome exit_code error lease_expires_ms")
# Columns every row of which may change: the coordinator's counters.
declare -A COUNTED=([counters]="value")
# Version 3 turned these placeholders (0, '', '{}', '[]') into NULL.
declare -A NULLED_V3=(
  [runs]="a moe started_ms finished_ms train_loss val_loss tokens_per_second"
  [attempts]="ended_ms exit_code" [fits]="sweep_id params n_obs cv")
for table in $TABLES; do
  conditions=()
  for column in $(old "SELECT name FROM pragma_table_info('$table')"); do
    same="n.\"$column\" IS o.\"$column\""
    if ((V < 3)) && [[ " ${NULLED_V3[$table]:-} " == *[[:space:]]$column[[:space:]]* ]]; then
      same+=" OR n.\"$column\" IS NULL"
    fi
    if [[ " ${CHANGED[$table]:-} " == *[[:space:]]$column[[:space:]]* ]]; then
      same+=" OR o.${RUN_KEY[$table]} = $RUN"
    fi
    [[ " ${COUNTED[$table]:-} " == *" $column "* ]] && same=1
    conditions+=("($same)")
  done
  where=$(printf ' AND %s' "${conditions[@]}")
  missing=$(new "ATTACH '$TEST_TMP/before.db' AS old;
                 SELECT count(*) FROM old.\"$table\" o
                 WHERE NOT EXISTS (SELECT 1 FROM main.\"$table\" n WHERE ${where# AND })") ||
    fail "cannot compare table $table"
  [ "$missing" = 0 ] || fail "$missing rows of $table are gone or changed"
  echo "v$V: $table: $(old "SELECT count(*) FROM \"$table\"") rows kept"
done
echo "upgrade_test v$V: ok in $((SECONDS - STARTED)) s"
