#!/usr/bin/env bash
# A database volume that fails (docs/fault-tolerance.md, "The database volume fills up or
# fails"), black-box: the real coordinator runs under libfiu's fiu-run, and fiu-ctrl makes
# every fsync and fdatasync it calls fail with EIO — as a dying disk or a lost network volume
# does — while a sweep runs on a real worker (fake_train), then lifts the fault. While the
# database cannot be written: xmod_database_writable is 0 on /metrics, `xmodctl sweep submit`
# exits non-zero naming the database and SQLite's cause (the coordinator answered, so not
# "cannot reach the coordinator"), reads are served, and the running attempt keeps its lease
# through three lease TTLs. Once the volume works again, without a restart: writable is 1, a
# submission is stored, the run ends SUCCEEDED in its one attempt with every step's
# train/loss, and the database passes integrity_check. Needs XMOD_BIN_DIR and
# XMOD_FAKE_TRAIN; fiu-run and fiu-ctrl (Debian's fiu-utils, scripts/setup.sh).
source "$(dirname "$0")/../lib/cluster.sh"
STEPS=3000  # 30 s or more: the trainer is still running when the fault has held 3 TTLs
TTL_MS=2000

fail() {
  echo "database_io_errors_test: FAIL: $*" >&2
  tail -n 20 "$TEST_TMP"/*.log >&2 || true
  exit 1
}
command -v fiu-run >/dev/null && command -v fiu-ctrl >/dev/null ||
  fail "fiu-run and fiu-ctrl not found: install fiu-utils (scripts/setup.sh)"
: "${XMOD_FAKE_TRAIN:?}"

xmodctl() { "$XMOD_BIN_DIR/xmodctl" --timeout 30 "$@"; }
# fault enable|disable: fsync and fdatasync of the coordinator fail with EIO (5), or work.
fault() {
  local extra=
  [ "$1" = enable ] && extra=,failinfo=5
  fiu-ctrl -c "$1 name=posix/io/sync/fsync$extra" -c "$1 name=posix/io/sync/fdatasync$extra" \
    "${COORD_PIDS[0]}" || fail "fiu-ctrl $1"
}

cat >"$TEST_TMP/sweep.textpb" <<SPEC
name: "io-errors"
grids { label: "g" archs: DENSE backbones: "tiny-test" seq_lens: 64 seeds: [1] }
training { flop_budget: 1e12 seq_len: 64 batch_tokens: 512 }
data { train_glob: "$TEST_TMP/none_*.bin" val_glob: "$TEST_TMP/none_*.bin" }
SPEC

COORDINATOR_WRAPPER="fiu-run -x" start_coordinator --nocheck_data_paths \
  --heartbeat_interval_ms=300 --lease_ttl_ms=$TTL_MS
FAKE_TRAIN_MODE=ok FAKE_TRAIN_STEPS=$STEPS FAKE_TRAIN_STEP_MS=10 \
  start_worker w1 --train_bin="$XMOD_FAKE_TRAIN"
xmodctl sweep submit "$TEST_TMP/sweep.textpb" >/dev/null || fail "the first submission"
wait_query "SELECT count(*) > 0 FROM metrics WHERE run_id = 1 AND step >= 20" 1 60

# --- the volume fails -------------------------------------------------------------------------
fault enable
wait_until 30 "xmod_database_writable 0" metric_is xmod_database_writable 0
if xmodctl sweep submit "$TEST_TMP/sweep.textpb" >"$TEST_TMP/refused.txt" 2>&1; then
  fail "a submission was accepted while the database cannot be written"
fi
grep -q "the database $TEST_TMP/xmod.db cannot be written (sqlite: disk I/O error" \
  "$TEST_TMP/refused.txt" || fail "the refusal does not name the database and the cause"
! grep -q "cannot reach" "$TEST_TMP/refused.txt" ||
  fail "the refusal says the coordinator cannot be reached: $(cat "$TEST_TMP/refused.txt")"
xmodctl sweep list | grep -q io-errors || fail "reads are not served while writes fail"
[ "$(metric 'xmod_database_failed_commits_total{code="UNAVAILABLE"}')" -gt 0 ] ||
  fail "no failed commit counted as UNAVAILABLE"
sleep $((3 * TTL_MS / 1000))  # three lease TTLs without a stored heartbeat
metric_is xmod_database_writable 0 || fail "the database became writable while the fault holds"
kill -0 "${PIDS[1]}" || fail "the worker exited"
curl -sf "http://127.0.0.1:$WORKER_METRICS/metrics" | grep -q '^xmod_worker_slots{state="busy"} 1' ||
  fail "the worker no longer runs the attempt (its trainer was stopped)"

# --- the volume works again -------------------------------------------------------------------
fault disable
wait_until 30 "xmod_database_writable 1" metric_is xmod_database_writable 1
xmodctl sweep submit "$TEST_TMP/sweep.textpb" >/dev/null || fail "a submission after recovery"
wait_query "SELECT state, attempts FROM runs WHERE id = 1" "SUCCEEDED|1" 120
[ "$(q "SELECT count(*) FROM attempts WHERE run_id = 1")" = 1 ] || fail "run 1 has more attempts"
[ "$(q "SELECT count(DISTINCT step) FROM metrics WHERE run_id = 1 AND name = 'train/loss'")" = \
  "$STEPS" ] || fail "run 1 lacks train/loss points"
[ "$(q "SELECT count(*) FROM sweeps")" = 2 ] || fail "not exactly two sweeps stored"
[ "$(q "PRAGMA integrity_check")" = ok ] || fail "integrity_check"
echo "database_io_errors_test: ok"
