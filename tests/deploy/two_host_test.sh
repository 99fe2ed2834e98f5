#!/usr/bin/env bash
# Two hosts, one gang (docs/architecture.md, "Gang scheduling"): two network namespaces
# joined by a veth pair (10.a.b.1/24 and 10.a.b.2/24), the coordinator and worker a in the
# first, worker b in the second, each worker with one 1-core CPU slot.
#   1. A 2-rank run with training.ranks_per_worker = 1 spans both workers: the TCPStore on
#      a's address, Gloo between the namespaces. Its train/loss and val/loss series match a
#      1-process run of the same spec (same global batch) within 1e-5 relative, the
#      tolerance of model/train/distributed_test.cc.
#   2. A longer gang run: once it has a checkpoint, machine b is killed (worker b and its
#      trainer, SIGKILL). The attempt ends on both workers (a's trainer is gone too), the run
#      is requeued, and with a replacement worker b2 in b's namespace it resumes from the
#      checkpoint as attempt 2 on a fresh gang and succeeds.
# Needs root for `ip netns`; where namespaces cannot be made it says why and runs the same
# test on 127.0.0.1 and 127.0.0.2 instead. Bounded: every wait has a deadline, the whole
# test a few minutes at most. Needs XMOD_BIN_DIR (xmod-coordinator, xmod-worker,
# xmod-train, xmodctl).
source "$(dirname "$0")/../lib/cluster.sh"
STARTED=$SECONDS
NET="10.$((200 + RANDOM % 50)).$((RANDOM % 250))"
NS_A="xmod2h-a-$$"
NS_B="xmod2h-b-$$"
NAMESPACES=0
SESSIONS=()  # session ids of the workers: each worker and its trainers

teardown() {
  local sid
  for sid in "${SESSIONS[@]}"; do pkill -9 -s "$sid" 2>/dev/null || true; done
  if [ "$NAMESPACES" = 1 ]; then
    ip netns del "$NS_A" 2>/dev/null || true
    ip netns del "$NS_B" 2>/dev/null || true
  fi
  cleanup
}
trap teardown EXIT

fail() {
  echo "two_host_test: FAIL: $*" >&2
  for log in "$TEST_TMP"/*.log; do
    echo "--- $log (tail)" >&2
    tail -n 25 "$log" >&2
  done
  exit 1
}

# The two hosts: namespaces if this machine lets us make them, else two loopback addresses.
if reason=$(ip netns add "$NS_A" 2>&1); then
  NAMESPACES=1
  ip netns add "$NS_B"
  ip link add "x2h$$a" type veth peer name "x2h$$b"
  ip link set "x2h$$a" netns "$NS_A"
  ip link set "x2h$$b" netns "$NS_B"
  ip -n "$NS_A" addr add "$NET.1/24" dev "x2h$$a"
  ip -n "$NS_B" addr add "$NET.2/24" dev "x2h$$b"
  for ns in "$NS_A" "$NS_B"; do
    ip -n "$ns" link set lo up
  done
  ip -n "$NS_A" link set "x2h$$a" up
  ip -n "$NS_B" link set "x2h$$b" up
  IN_A=(ip netns exec "$NS_A")
  IN_B=(ip netns exec "$NS_B")
  HOST_A="$NET.1"
  HOST_B="$NET.2"
  ADVERTISE_A=()  # the default: the address the coordinator sees each worker connect from
  ADVERTISE_B=()
  echo "two_host_test: namespaces $NS_A ($HOST_A) and $NS_B ($HOST_B) over a veth pair"
else
  echo "two_host_test: cannot make network namespaces (ip netns add: ${reason:-not root});" \
    "using 127.0.0.1 and 127.0.0.2 on this host instead"
  IN_A=()
  IN_B=()
  HOST_A=127.0.0.1
  HOST_B=127.0.0.2
  ADVERTISE_A=(--advertise_host=127.0.0.1)
  ADVERTISE_B=(--advertise_host=127.0.0.2)
fi

use_credentials a b b2
"${IN_A[@]}" "$XMOD_BIN_DIR/xmod-coordinator" --listen="$HOST_A:0" --http_listen=127.0.0.1:0 \
  --metrics_listen=127.0.0.1:0 --db="$TEST_TMP/xmod.db" --checkpoint_root="$TEST_TMP/checkpoints" \
  --ports_file="$TEST_TMP/ports.json" --credentials_file="$CREDENTIALS_FILE" \
  --lease_ttl_ms=5000 --heartbeat_interval_ms=500 >"$TEST_TMP/coordinator.log" 2>&1 &
PIDS+=($!)
COORD_PIDS+=($!)
wait_for "$TEST_TMP/ports.json" 30 || fail "the coordinator did not start"
export XMOD_ADDR="$HOST_A:$(json_field "$TEST_TMP/ports.json" grpc)"

# start_worker_in NAME HOST_PREFIX... -- ADVERTISE...: a worker in its own session (so the
# worker and its trainers can be killed together, as a machine dies).
start_worker_in() {
  local name=$1
  shift
  "$@" setsid "$XMOD_BIN_DIR/xmod-worker" --coordinator="$XMOD_ADDR" --name="$name" \
    --work_dir="$TEST_TMP/$name" --cpu_slots=1 --cores_per_slot=1 --acquire_wait_ms=1000 \
    --rendezvous_ports=29400-29409 --token_file="$TEST_TMP/$name.token" \
    "${WORKER_FLAGS[@]}" >"$TEST_TMP/$name.log" 2>&1 &
  SESSIONS+=($!)
  LAST_SESSION=$!
  disown  # killed on purpose below: no job notices
}
WORKER_FLAGS=("${ADVERTISE_A[@]}")
start_worker_in a "${IN_A[@]}"
WORKER_FLAGS=("${ADVERTISE_B[@]}")
start_worker_in b "${IN_B[@]}"
SESSION_B=$LAST_SESSION

write_learnable_shards "$TEST_TMP"

# sweep NAME BUDGET RANKS RANKS_PER_WORKER [CHECKPOINT_EVERY]: a one-run sweep spec file.
sweep() {
  cat >"$TEST_TMP/$1.textpb" <<EOF
name: "$1"
max_attempts: 3
grids { label: "g" archs: DENSE backbones: "tiny-test" seq_lens: 16 }
training {
  flop_budget: $2 seq_len: 16 batch_tokens: 64 ranks: $3 ranks_per_worker: $4
  lr: 0.02 adamw_lr: 0.01 eval_marks: 2 eval_tokens: 64 seed: 9 threads: 1
  log_every_steps: 1 checkpoint_every_steps: ${5:-0}
  precision: "fp32"  # the gang's losses match one process's only in fp32 (bf16 rounds each rank's half apart)
}
data { train_glob: "$TEST_TMP/train_*.bin" val_glob: "$TEST_TMP/val_*.bin" }
EOF
  "${IN_A[@]}" "$XMOD_BIN_DIR/xmodctl" sweep submit "$TEST_TMP/$1.textpb" >/dev/null ||
    fail "cannot submit $1"
}

run_of() { q "SELECT r.id FROM runs r JOIN sweeps s ON s.id = r.sweep_id WHERE s.name = '$1'"; }

# --- 1. A gang across the two hosts trains like one process. ---------------------------
sweep gang 1e9 2 1
sweep single 1e9 1 0
GANG=$(run_of gang)
SINGLE=$(run_of single)
wait_query "SELECT state FROM runs WHERE id IN ($GANG, $SINGLE) ORDER BY id" \
  "$(printf 'SUCCEEDED\nSUCCEEDED')" 90
members=$(q "SELECT worker FROM attempts WHERE run_id = $GANG")
[ "$members" = "a,b" ] || [ "$members" = "b,a" ] ||
  fail "the gang ran on [$members], not on a and b"
/usr/bin/python3 - "$TEST_TMP/xmod.db" "$GANG" "$SINGLE" <<'PY' || fail "the gang's losses differ"
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
def series(run, name):
    return db.execute("SELECT step, value FROM metrics WHERE run_id = ? AND name = ?"
                      " ORDER BY step", (run, name)).fetchall()
for name in ("train/loss", "val/loss"):
    gang, single = series(sys.argv[2], name), series(sys.argv[3], name)
    assert gang and len(gang) == len(single), f"{name}: {len(gang)} vs {len(single)} points"
    for (gs, gv), (ss, sv) in zip(gang, single):
        assert gs == ss, f"{name}: step {gs} vs {ss}"
        assert abs(gv - sv) <= 1e-5 * abs(sv) + 1e-12, f"{name} at step {gs}: {gv} vs {sv}"
    print(f"two_host_test: {name}: {len(gang)} points of the 2-host gang match 1 process "
          f"within 1e-5 (final {gang[-1][1]:.6f} vs {single[-1][1]:.6f})")
PY

# --- 2. Losing one host ends the gang; the run resumes on a fresh one. -------------------
sweep long 1.6e10 2 1 25
LONG=$(run_of long)
wait_query "SELECT COUNT(*) > 0 FROM checkpoints WHERE run_id = $LONG AND attempt = 1" 1 90
wait_query "SELECT state FROM runs WHERE id = $LONG" RUNNING 5
pkill -9 -s "$SESSION_B" || fail "nothing to kill on host b"
echo "two_host_test: killed host b (worker b and its trainer) at step" \
  "$(q "SELECT step FROM runs WHERE id = $LONG")"
wait_query "SELECT outcome IN ('lost', 'failed') FROM attempts WHERE run_id = $LONG AND attempt = 1" \
  1 30
# a's rank of the dead gang is stopped as well (by its collective failing or a KILL order).
deadline=$((SECONDS + 30))
while pgrep -f "$TEST_TMP/a/run-$LONG-a1/" >/dev/null; do
  ((SECONDS > deadline)) && fail "worker a still runs a trainer of the dead gang"
  sleep 0.3
done
echo "two_host_test: attempt 1 ended on both hosts:" \
  "$(q "SELECT outcome || ': ' || error FROM attempts WHERE run_id = $LONG AND attempt = 1")"
[ "$(q "SELECT state FROM runs WHERE id = $LONG")" = QUEUED ] ||
  fail "the run is not requeued while one worker is left"
WORKER_FLAGS=("${ADVERTISE_B[@]}")
start_worker_in b2 "${IN_B[@]}"
wait_query "SELECT state FROM runs WHERE id = $LONG" SUCCEEDED 120
attempt2=$(q "SELECT worker, resumed_from_step > 0, outcome FROM attempts
              WHERE run_id = $LONG AND attempt = 2")
case "$attempt2" in
  "a,b2|1|succeeded" | "b2,a|1|succeeded") ;;
  *) fail "attempt 2 is [$attempt2], not a resumed, succeeded gang of a and b2" ;;
esac
[ "$(q "SELECT COUNT(*) FROM attempts WHERE run_id = $LONG")" = 2 ] || fail "more than 2 attempts"
echo "two_host_test: attempt 2 on a fresh gang ($attempt2) resumed from step" \
  "$(q "SELECT resumed_from_step FROM attempts WHERE run_id = $LONG AND attempt = 2")"
echo "two_host_test: PASS in $((SECONDS - STARTED)) s"
