# Shell helpers for tests that start real xmod processes on loopback. Source it; it needs
# XMOD_BIN_DIR. Every process started here is stopped by the EXIT trap: workers (and any
# other process in PIDS) first, so that they drain to a coordinator that is still up, then
# the coordinators; each gets SIGTERM and, after a grace period, SIGKILL, so that cleanup
# never hangs.
set -euo pipefail
: "${XMOD_BIN_DIR:?XMOD_BIN_DIR must point at the bin directory of a build}"
TEST_TMP=$(mktemp -d /tmp/xmod-test.XXXXXX)
PIDS=()        # every process started here
COORD_PIDS=()  # those of PIDS that are coordinators: stopped last

# wait_pids SECONDS PID...: waits until every PID has exited, at most SECONDS in all, then
# SIGKILLs and reaps whatever is left.
wait_pids() {
  local deadline=$((SECONDS + $1)) pid
  shift
  for pid in "$@"; do
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

# stop_pids SECONDS PID...: SIGTERM to each PID, then wait_pids.
stop_pids() {
  local grace=$1 pid
  shift
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait_pids "$grace" "$@"
}

cleanup() {
  local pid others=()
  for pid in "${PIDS[@]}"; do
    [[ " ${COORD_PIDS[*]} " == *" $pid "* ]] || others+=("$pid")
  done
  stop_pids 30 "${others[@]}"
  stop_pids 30 "${COORD_PIDS[@]}"
  if [ "${KEEP_TMP:-0}" = 1 ]; then echo "kept $TEST_TMP"; else rm -rf "$TEST_TMP"; fi
}
trap cleanup EXIT

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_for FILE SECONDS: until FILE exists and is non-empty.
wait_for() {
  local deadline=$((SECONDS + $2))
  until [ -s "$1" ]; do
    if ((SECONDS > deadline)); then echo "timed out waiting for $1" >&2; return 1; fi
    sleep 0.2
  done
}

# wait_until SECONDS WHAT COMMAND...: retries COMMAND every 0.25 s until it succeeds; after
# SECONDS, calls the test's own `fail` (which says why and shows its logs) with WHAT.
wait_until() {
  local limit=$1 what=$2 deadline=$((SECONDS + $1))
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "waited ${limit} s for $what"
    sleep 0.25
  done
}

# json_field FILE KEY: a top-level number from a small JSON file.
# metric NAME: its value on the coordinator's /metrics (NAME with its labels, as exposed).
metric() {
  curl -sf "http://127.0.0.1:$COORD_METRICS/metrics" | awk -v m="$1" '$1 == m {print $2}'
}
metric_is() { [ "$(metric "$1")" = "$2" ]; }

json_field() {
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# q SQL: rows of a read-only query on the coordinator's database (DB_PATH, else
# $TEST_TMP/xmod.db), fields joined by '|'.
q() {
  /usr/bin/python3 - "${DB_PATH:-$TEST_TMP/xmod.db}" "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True, timeout=10)
for row in db.execute(sys.argv[2]):
    print("|".join("" if v is None else str(v) for v in row))
PY
}

# wait_query SQL WANT SECONDS: until the query's output is WANT; else the test's `fail`.
wait_query() {
  local deadline=$((SECONDS + $3)) got
  while true; do
    got=$(q "$1" 2>/dev/null || true)
    [ "$got" = "$2" ] && return 0
    ((SECONDS > deadline)) && fail "waited $3 s for [$1] = [$2], have [$got]"
    sleep 0.3
  done
}

# write_learnable_shards DIR: DIR/train_0.bin (400,000 tokens) and DIR/val_0.bin (20,000) of
# a learnable sequence (a successor rule with 10% noise, vocabulary 61), as the integration
# test's, for runs of the tiny-test backbone with the real xmod-train.
write_learnable_shards() {
  /usr/bin/python3 - "$1" <<'PY'
import random, struct, sys
def shard(path, n, seed):
    rng = random.Random(seed)
    t, out = rng.randrange(61), []
    for _ in range(n):
        t = rng.randrange(61) if rng.randrange(10) == 0 else (5 * t + 3) % 61
        out.append(t)
    header = [20240520, 1, n] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header) + struct.pack(f"<{n}H", *out))
shard(f"{sys.argv[1]}/train_0.bin", 400000, 1)
shard(f"{sys.argv[1]}/val_0.bin", 20000, 2)
PY
}

# use_credentials WORKER...: from here on the coordinator starts with a credentials file
# (users "tester" and "other", admin "operator", read "viewer", and a worker credential for
# each WORKER name), each worker sends its own token file, and xmodctl reads XMOD_TOKEN_FILE
# (tester's). Sets CREDENTIALS_FILE, READ_TOKEN_FILE, OTHER_TOKEN_FILE and ADMIN_TOKEN_FILE
# (their token files: $TEST_TMP/NAME.token). Secrets go through files only, never argv.
use_credentials() {
  local entry secret
  CREDENTIALS_FILE=$TEST_TMP/credentials
  (
    umask 077
    : >"$CREDENTIALS_FILE"
    local workers=()
    (($#)) && workers=($(printf 'worker:%s ' "$@"))
    for entry in user:tester user:other admin:operator read:viewer "${workers[@]}"; do
      secret=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
      echo "${entry%%:*} ${entry#*:} $secret" >>"$CREDENTIALS_FILE"
      echo "$secret" >"$TEST_TMP/${entry#*:}.token"
    done
  )
  export XMOD_TOKEN_FILE=$TEST_TMP/tester.token
  READ_TOKEN_FILE=$TEST_TMP/viewer.token
  OTHER_TOKEN_FILE=$TEST_TMP/other.token
  ADMIN_TOKEN_FILE=$TEST_TMP/operator.token
}

# start_coordinator [extra flags]: sets COORD_GRPC, COORD_HTTP, COORD_METRICS. The database
# is $TEST_TMP/xmod.db and the checkpoint root $TEST_TMP/checkpoints unless DB_PATH or
# CHECKPOINT_ROOT name others. COORDINATOR_WRAPPER, when set, is a command (split on spaces)
# that execs the coordinator, e.g. "fiu-run -x".
start_coordinator() {
  ${COORDINATOR_WRAPPER:-} "$XMOD_BIN_DIR/xmod-coordinator" --listen=127.0.0.1:0 \
    --http_listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --db="${DB_PATH:-$TEST_TMP/xmod.db}" \
    --checkpoint_root="${CHECKPOINT_ROOT:-$TEST_TMP/checkpoints}" \
    --ports_file="$TEST_TMP/ports.json" \
    ${CREDENTIALS_FILE:+--credentials_file="$CREDENTIALS_FILE"} "$@" \
    >"$TEST_TMP/coordinator.log" 2>&1 &
  PIDS+=($!)
  COORD_PIDS+=($!)
  wait_for "$TEST_TMP/ports.json" 30
  COORD_GRPC=$(json_field "$TEST_TMP/ports.json" grpc)
  COORD_HTTP=$(json_field "$TEST_TMP/ports.json" http)
  COORD_METRICS=$(json_field "$TEST_TMP/ports.json" metrics)
  export XMOD_ADDR="127.0.0.1:$COORD_GRPC"
}

# start_worker NAME [extra flags]: one worker with one 1-core CPU slot; sets WORKER_METRICS.
# Its stop bound (10 s kill grace + 5 s drain + one 10 s RPC) is within cleanup's 30 s.
start_worker() {
  local name=$1; shift
  WORKER_METRICS=$(free_port)
  "$XMOD_BIN_DIR/xmod-worker" --coordinator="127.0.0.1:$COORD_GRPC" --name="$name" \
    --work_dir="$TEST_TMP/$name" --cpu_slots=1 --cores_per_slot=1 \
    --kill_grace_ms=10000 --drain_timeout_ms=5000 \
    --metrics_listen="127.0.0.1:$WORKER_METRICS" \
    ${CREDENTIALS_FILE:+--token_file="$TEST_TMP/$name.token"} "$@" >"$TEST_TMP/$name.log" 2>&1 &
  PIDS+=($!)
}
