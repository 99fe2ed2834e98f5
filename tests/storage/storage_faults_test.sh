#!/usr/bin/env bash
# Storage faults, black-box (docs/fault-tolerance.md, "Storage faults"): the real coordinator,
# two real workers and the real xmod-train, with the database, the checkpoint root and one
# worker's spill folder each on a small tmpfs this test mounts in its own mount namespace
# (unshare), filled during a sweep with dd and then freed.
#   1. Database and spill volumes full together. While the database cannot be written:
#      xmod_database_writable is 0 on /metrics, a new sweep is refused (RESOURCE_EXHAUSTED,
#      naming the database and the cause), reads are served, and the running runs keep their
#      leases through three lease TTLs (the code, RESOURCE_EXHAUSTED, is the scheduler test's). Worker w1's metric points wait in its spill; worker
#      w2 cannot spill, holds --metric_overflow_points in memory, then ends its attempt FAILED
#      ("the metric buffer is full"). Space returns: writable again without a restart, the
#      sweep submitted, w1's run ends SUCCEEDED in its one attempt with every step's metrics,
#      and w2's run is retried and succeeds.
#   2. Checkpoint volume full. A checkpoint write fails: the trainer logs it and trains on,
#      nothing partial is left or recorded; space returns, the worker is killed, and the run
#      resumes on the other worker from the last checkpoint recorded. Its final losses equal a
#      fault-free run's of the same spec, bit for bit.
# Skipped (77), saying why, where a mount namespace or tmpfs cannot be made (not root).
# Bounded: every wait has a deadline. Needs XMOD_BIN_DIR (xmod-coordinator, xmod-worker,
# xmod-train, xmodctl).
set -euo pipefail
if [[ ${XMOD_STORAGE_NS:-} != 1 ]]; then
  if ! why=$(unshare --mount --propagation private true 2>&1); then
    echo "storage_faults_test: SKIP: cannot make a mount namespace (${why:-not root})"
    exit 77
  fi
  XMOD_STORAGE_NS=1 exec unshare --mount --propagation private "$0" "$@"
fi
source "$(dirname "$0")/../lib/cluster.sh"
STARTED=$SECONDS
SESSIONS=()  # each worker's session: the worker and its trainers

VOLUMES=$(mktemp -d /tmp/xmod-volumes.XXXXXX)  # the tmpfs mounts, outside TEST_TMP
# Workers (in their sessions) first, then what cluster.sh started, then the volumes.
teardown() {
  local sid
  for sid in "${SESSIONS[@]}"; do pkill -TERM -s "$sid" 2>/dev/null || true; done
  sleep 1
  for sid in "${SESSIONS[@]}"; do pkill -KILL -s "$sid" 2>/dev/null || true; done
  umount "$TEST_TMP/w2/spill" 2>/dev/null || true
  cleanup
  umount "$VOLUMES"/* 2>/dev/null || true
  rm -rf "$VOLUMES"
}
trap teardown EXIT

fail() {
  echo "storage_faults_test: FAIL: $*" >&2
  for log in "$TEST_TMP"/*.log "$TEST_TMP"/w*/run-*/train.log; do
    [ -f "$log" ] || continue
    echo "--- $log (tail)" >&2
    tail -n 20 "$log" >&2
  done
  exit 1
}

# volume NAME SIZE: a tmpfs of SIZE at $VOLUMES/NAME; prints its path.
volume() {
  local dir=$VOLUMES/$1
  mkdir -p "$dir"
  if ! why=$(mount -t tmpfs -o "size=$2" "xmod-$1" "$dir" 2>&1); then
    echo "storage_faults_test: SKIP: cannot mount a tmpfs ($why)"
    exit 77
  fi
  echo "$dir"
}
# fill DIR: writes until the volume is full; unfill DIR: frees it again.
fill() {
  dd if=/dev/zero of="$1/fill" bs=64k status=none 2>/dev/null || true
  dd if=/dev/zero of="$1/fill-tail" bs=512 status=none 2>/dev/null || true
  echo "storage_faults_test: filled $1 ($(df --output=avail -B1 "$1" | tail -1 | tr -d ' ') bytes left)"
}
unfill() { rm -f "$1/fill" "$1/fill-tail"; }

DB_VOL=$(volume db 32m)
CKPT_VOL=$(volume checkpoints 64m)
SPILL_VOL=$(volume spill 1m)
export DB_PATH=$DB_VOL/xmod.db CHECKPOINT_ROOT=$CKPT_VOL
start_coordinator --lease_ttl_ms=5000 --heartbeat_interval_ms=500
LEASE_TTL_S=5

# start_worker_in_session NAME FLAGS...: a worker with one 1-core CPU slot in its own session.
start_worker_in_session() {
  local name=$1
  shift
  mkdir -p "$TEST_TMP/$name"
  setsid "$XMOD_BIN_DIR/xmod-worker" --coordinator="127.0.0.1:$COORD_GRPC" --name="$name" \
    --work_dir="$TEST_TMP/$name" --cpu_slots=1 --cores_per_slot=1 --acquire_wait_ms=1000 \
    --kill_grace_ms=10000 --drain_timeout_ms=5000 "$@" >"$TEST_TMP/$name.log" 2>&1 &
  SESSIONS+=($!)
  LAST_SESSION=$!
  disown
}
start_worker_in_session w1
# w2 spills onto the small volume, holding few points in memory.
mkdir -p "$TEST_TMP/w2/spill"
mount --bind "$SPILL_VOL" "$TEST_TMP/w2/spill"
start_worker_in_session w2 --metric_memory_points=32 --metric_overflow_points=64
SESSION_W2=$LAST_SESSION

write_learnable_shards "$TEST_TMP"

# sweep_spec NAME BUDGET CHECKPOINT_EVERY SEEDS: a sweep of SEEDS tiny dense runs.
sweep_spec() {
  cat >"$TEST_TMP/$1.textpb" <<EOF
name: "$1"
max_attempts: 3
grids { label: "g" archs: DENSE backbones: "tiny-test" seq_lens: 16 seeds: [$4] }
training {
  flop_budget: $2 seq_len: 16 batch_tokens: 64 lr: 0.02 adamw_lr: 0.01 eval_marks: 2
  eval_tokens: 64 threads: 1 log_every_steps: 1 checkpoint_every_steps: $3 precision: "fp32"
}
data { train_glob: "$TEST_TMP/train_*.bin" val_glob: "$TEST_TMP/val_*.bin" }
EOF
  echo "$TEST_TMP/$1.textpb"
}
submit() { "$XMOD_BIN_DIR/xmodctl" sweep submit "$1" >/dev/null || fail "cannot submit $1"; }
runs_of() {
  q "SELECT r.id FROM runs r JOIN sweeps s ON s.id = r.sweep_id WHERE s.name = '$1' ORDER BY r.id"
}
# gapless RUN: every step's train/loss is stored, from one attempt or another, 1..steps.
gapless() {
  q "SELECT COUNT(DISTINCT step) = MAX(step) AND MIN(step) = 1 FROM metrics
     WHERE run_id = $1 AND name = 'train/loss'"
}

# --- 1. The database and a spill volume fill up during a sweep. ---------------------------
# About 2,000 steps a run, so that both still write metrics well after the volumes fill. With
# 200 steps a fresh-clone run on a quiet machine finished both runs within about a second of
# the fill, and /metrics never reported the database unwritable.
submit "$(sweep_spec full 6e10 20 '1, 2')"
read -r RUN_A RUN_B <<<"$(runs_of full | paste -sd ' ')"
wait_query "SELECT COUNT(*) FROM runs WHERE id IN ($RUN_A, $RUN_B) AND state = 'RUNNING'
            AND step >= 5" 2 120
W2_RUN=$(q "SELECT run_id FROM attempts WHERE worker = 'w2' AND run_id IN ($RUN_A, $RUN_B)")
W1_RUN=$((RUN_A + RUN_B - W2_RUN))
fill "$SPILL_VOL"
fill "$DB_VOL"
wait_until 60 "/metrics to say that the full database cannot be written" \
  metric_is xmod_database_writable 0
FULL_AT=$SECONDS
echo "storage_faults_test: the database cannot be written (xmod_database_writable 0)"
if out=$("$XMOD_BIN_DIR/xmodctl" sweep submit "$(sweep_spec after 1e9 0 1)" 2>&1); then
  fail "a sweep was accepted while the database cannot be written: $out"
fi
grep -q "xmod.db cannot be written (.*database or disk is full" <<<"$out" ||
  fail "the refusal does not name the database and the cause: $out"
echo "storage_faults_test: new work refused: $(head -c 300 <<<"$out")"
"$XMOD_BIN_DIR/xmodctl" sweep list >/dev/null || fail "reads are not served while full"
"$XMOD_BIN_DIR/xmodctl" runs list >/dev/null || fail "run listings are not served while full"
# Three lease TTLs with nothing stored: w1's run must still be running when space returns.
wait_until 120 "w2 to run out of metric buffer" grep -q "the metric buffer is full" \
  "$TEST_TMP/w2.log"
echo "storage_faults_test: w2 ended its attempt: the metric buffer is full"
while ((SECONDS < FULL_AT + 3 * LEASE_TTL_S)); do sleep 0.5; done
[ "$(metric xmod_database_writable)" = 0 ] || fail "the database became writable while full"
unfill "$DB_VOL"
unfill "$SPILL_VOL"
wait_until 60 "the database to be writable once space returned" \
  metric_is xmod_database_writable 1
echo "storage_faults_test: space returned; writable again after" \
  "$((SECONDS - FULL_AT)) s, no restart; $(metric 'xmod_database_failed_commits_total{code="RESOURCE_EXHAUSTED"}') failed commits"
submit "$TEST_TMP/after.textpb"
wait_query "SELECT COUNT(*) FROM runs r JOIN sweeps s ON s.id = r.sweep_id
            WHERE s.name IN ('full', 'after') AND r.state = 'SUCCEEDED'" 3 240
[ "$(q "SELECT COUNT(*) || outcome FROM attempts WHERE run_id = $W1_RUN")" = 1succeeded ] ||
  fail "w1's run did not succeed in its one attempt: $(q "SELECT * FROM attempts WHERE run_id = $W1_RUN")"
[ "$(gapless "$W1_RUN")" = 1 ] || fail "w1's run lost metric points"
first=$(q "SELECT outcome || ': ' || error FROM attempts WHERE run_id = $W2_RUN AND attempt = 1")
grep -q "^failed: .*the metric buffer is full" <<<"$first" ||
  fail "w2's first attempt did not end for its full buffer: $first"
[ "$(gapless "$W2_RUN")" = 1 ] || fail "w2's run has gaps in its metrics"
echo "storage_faults_test: part 1 passed: w1's run succeeded in 1 attempt with every step," \
  "w2's run was retried ($(q "SELECT COUNT(*) FROM attempts WHERE run_id = $W2_RUN") attempts)"

# --- 2. The checkpoint volume fills up. ------------------------------------------------------
submit "$(sweep_spec ckpt 2.4e10 10 3)"
submit "$(sweep_spec reference 2.4e10 15 3)"
RUN_C=$(runs_of ckpt)
RUN_R=$(runs_of reference)
wait_query "SELECT COUNT(*) > 0 FROM checkpoints WHERE run_id = $RUN_C AND attempt = 1" 1 120
wait_query "SELECT state FROM runs WHERE id = $RUN_C" RUNNING 5
C_WORKER=$(q "SELECT worker FROM attempts WHERE run_id = $RUN_C AND attempt = 1")
fill "$CKPT_VOL"
deadline=$((SECONDS + 120))
until grep -q "not written, training goes on" "$TEST_TMP/$C_WORKER/run-$RUN_C-a1/train.log"; do
  ((SECONDS < deadline)) || fail "no checkpoint write failed on the full volume"
  [ "$(q "SELECT state FROM runs WHERE id = $RUN_C")" = RUNNING ] ||
    fail "run $RUN_C ended before a checkpoint write failed"
  sleep 0.25
done
# The worker dies while the volume is still full: the resume must come from a checkpoint
# written before the fault, and the one that failed must be nowhere.
if [ "$C_WORKER" = w2 ]; then pkill -KILL -s "$SESSION_W2"; else pkill -KILL -s "${SESSIONS[0]}"; fi
FAILED_STEP=$(grep -o "checkpoint at step [0-9]* not written" \
  "$TEST_TMP/$C_WORKER/run-$RUN_C-a1/train.log" | head -1 | cut -d' ' -f4)
wait_query "SELECT outcome != 'running' FROM attempts WHERE run_id = $RUN_C AND attempt = 1" 1 60
# Attempt 1's newest recorded checkpoint: the next attempt (on the surviving worker, as soon
# as the lease expires) resumes from it, and may write its own, to space other runs freed.
# Read from the checkpoint events ("attempt 1 step N: path", stored with each recorded
# checkpoint and never deleted): attempt 2 may already have recorded two checkpoints, and the
# checkpoints table keeps a run's two newest only.
RESUME_STEP=$(q "SELECT MAX(CAST(substr(text, 16, instr(text, ':') - 16) AS INTEGER))
  FROM events WHERE run_id = $RUN_C AND kind = 'checkpoint' AND text LIKE 'attempt 1 step %'")
((FAILED_STEP > RESUME_STEP)) || fail "checkpoint step $FAILED_STEP failed, yet $RESUME_STEP is recorded"
leftovers=$(find "$CKPT_VOL"/*/run-"$RUN_C" -name "ckpt-a1-s$(printf %010d "$FAILED_STEP")*" \
  -o -name 'ckpt-a1-*.tmp*' | head -3)
[ -z "$leftovers" ] || fail "the failed checkpoint write left $leftovers"
echo "storage_faults_test: checkpoint step $FAILED_STEP failed, the trainer went on; killed" \
  "$C_WORKER; the newest recorded checkpoint is step $RESUME_STEP"
unfill "$CKPT_VOL"
start_worker_in_session "${C_WORKER}b"
wait_query "SELECT state FROM runs WHERE id IN ($RUN_C, $RUN_R) ORDER BY id" \
  "$(printf 'SUCCEEDED\nSUCCEEDED')" 240
resumed=$(q "SELECT resumed_from_step FROM attempts WHERE run_id = $RUN_C AND attempt = 2")
[ "$resumed" = "$RESUME_STEP" ] ||
  fail "attempt 2 resumed from step $resumed, not attempt 1's last recorded checkpoint $RESUME_STEP"
/usr/bin/python3 - "$DB_PATH" "$RUN_C" "$RUN_R" <<'PY' || fail "the resumed run's losses differ"
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
def series(run, name):  # each step's value from the latest attempt that reported it
    rows = db.execute("SELECT step, value FROM metrics WHERE run_id = ? AND name = ?"
                      " ORDER BY step, attempt", (run, name)).fetchall()
    return sorted(dict(rows).items())
for name in ("train/loss", "val/loss"):
    got, want = series(sys.argv[2], name), series(sys.argv[3], name)
    assert got and got == want, f"{name}: {got[-3:]} vs {want[-3:]}"
    print(f"storage_faults_test: {name}: {len(got)} points equal the fault-free run's "
          f"(final {got[-1][1]!r})")
PY
echo "storage_faults_test: PASS in $((SECONDS - STARTED)) s"
