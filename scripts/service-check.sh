#!/usr/bin/env bash
# The whole service, end to end, from the service bundle (scripts/make-bundle.sh) unpacked into
# an empty prefix: a coordinator and a worker that finds its devices by itself (the GPUs
# nvidia-smi lists, else one CPU slot), a sweep submitted and watched with xmodctl, the worker
# SIGKILLed once mid-run and restarted, the killed run resumed from its checkpoint, then the
# results table from the database and the worker's GPU telemetry from its /metrics. Run by
# `scripts/gpu-check.sh --e2e`, which builds the trainer first (docs/gpu-training.md, "The whole
# service on a GPU machine"); CI runs it with --device cpu.
#
#   scripts/service-check.sh --train-bin PATH [--bundle FILE] [--device cuda|cpu] [--out FILE]
#
# --bundle: default .cache/xmod-bundle.tar.xz; --out: the JSON summary (default
# $OUT/service-check.json when $OUT is set, else build/service-check.json). The work folder
# (logs, database) is kept when the check fails. Everything listens on 127.0.0.1 on ports the processes pick. Exit status 0 when the
# sweep ended with every run SUCCEEDED and the killed run resumed from its last checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TRAIN_BIN=""
BUNDLE=.cache/xmod-bundle.tar.xz
DEVICE=cuda
RESULT=""
while (($#)); do
  case "$1" in
    --train-bin) TRAIN_BIN=$(readlink -f "$2"); shift 2 ;;
    --bundle) BUNDLE=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --out) RESULT=$2; shift 2 ;;
    *) echo "service-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ "$DEVICE" == cuda || "$DEVICE" == cpu ]] || { echo "service-check: --device cuda|cpu" >&2; exit 2; }
[[ -x "$TRAIN_BIN" ]] || { echo "service-check: --train-bin: no executable '$TRAIN_BIN'" >&2; exit 2; }
[[ -f "$BUNDLE" ]] || { echo "service-check: no bundle $BUNDLE (scripts/make-bundle.sh)" >&2; exit 2; }
log() { echo "service-check: $*" >&2; }
START=$SECONDS

# The bundle, unpacked into an empty prefix: the daemons and xmodctl run from there.
PREFIX=$(mktemp -d /tmp/xmod-service.XXXXXX)
tar -C "$PREFIX" -xJf "$BUNDLE"
export XMOD_BIN_DIR=$PREFIX/xmod-service/bin
"$ROOT/scripts/make-bundle.sh" --verify "$PREFIX" >&2 || { log "the bundle is incomplete"; exit 1; }
"$XMOD_BIN_DIR/xmodctl" --version >/dev/null || { log "the bundle's xmodctl does not run"; exit 1; }
source "$ROOT/tests/lib/cluster.sh"
trap 'cleanup; rm -rf "$PREFIX"' EXIT
RESULT=${RESULT:-${OUT:+$OUT/service-check.json}}
RESULT=${RESULT:-$ROOT/build/service-check.json}
mkdir -p "$(dirname "$RESULT")"
# keep_logs: the work folder (logs, database) outlives the check.
keep_logs() {
  # shellcheck disable=SC2034  # read by tests/lib/cluster.sh's cleanup
  KEEP_TMP=1
  log "logs kept in $TEST_TMP"
}
fail() {
  log "FAILED: $*"
  keep_logs
  tail -n 20 "$TEST_TMP"/coordinator.log "$TEST_TMP"/worker*.log 2>/dev/null >&2 || true
  /usr/bin/python3 -c 'import json,sys; print(json.dumps({"device": sys.argv[1], "passed": False, "error": sys.argv[2]}))' \
    "$DEVICE" "$*" >"$RESULT"
  exit 1
}
log "bundle unpacked into $PREFIX; work folder $TEST_TMP"

start_coordinator --lease_ttl_ms=5000 --heartbeat_interval_ms=500 \
  --dashboard_dir="$PREFIX/xmod-service/share/xmod/dashboard"
WORKER_METRICS=$(free_port)
# The worker: its devices found by itself; on CPU one slot of all cores.
WORKER_PID=""
start_service_worker() {
  local gpus=(--gpus)
  [[ "$DEVICE" == cpu ]] && gpus=(--gpus=false --cpu_slots=1)
  "$XMOD_BIN_DIR/xmod-worker" --coordinator="127.0.0.1:$COORD_GRPC" --name=gpu-check \
    --work_dir="$TEST_TMP/worker" --train_bin="$TRAIN_BIN" "${gpus[@]}" \
    --metrics_listen="127.0.0.1:$WORKER_METRICS" --gpu_sample_ms=1000 --acquire_wait_ms=1000 \
    --kill_grace_ms=10000 --drain_timeout_ms=5000 >>"$TEST_TMP/worker.log" 2>&1 &
  WORKER_PID=$!
  PIDS+=("$WORKER_PID")
}
start_service_worker
wait_query "SELECT COUNT(*) FROM workers" 1 60
# worker_metrics: the worker's /metrics page.
worker_metrics() {
  /usr/bin/python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
    "http://127.0.0.1:$WORKER_METRICS/metrics"
}
# worker_slots: its xmod_worker_slots lines (the slots by kind).
worker_slots() { worker_metrics | grep '^xmod_worker_slots' | tr '\n' ' '; }
wait_until 30 "the worker's /metrics" worker_slots
SLOTS=$(worker_slots)

# The sweep: Dense and X-MoD, checkpointed often, on synthetic shards (a learnable sequence,
# vocabulary 61): this checks the machinery, it is no scaling-law point.
write_learnable_shards "$TEST_TMP"
if [[ "$DEVICE" == cuda ]]; then
  # 165M at L = 1024, bf16, 32,768 tokens a step; 8e15 training FLOPs is about 3.9M tokens
  # of Dense (120 steps) and 4.9M of X-MoD K4 A1: well under a minute each on an H100/H200.
  MODEL='backbones: "165M" seq_lens: 1024'
  TRAINING='flop_budget: 8e15 seq_len: 1024 batch_tokens: 32768 precision: "bf16" eval_marks: 2 eval_tokens: 65536 log_every_steps: 10 checkpoint_every_steps: 20'
else
  # tiny-test at L = 16: about 260 steps of 64 tokens (Dense), seconds on one core.
  MODEL='backbones: "tiny-test" seq_lens: 16'
  TRAINING='flop_budget: 8e9 seq_len: 16 batch_tokens: 64 lr: 0.02 adamw_lr: 0.01 precision: "fp32" eval_marks: 2 eval_tokens: 64 log_every_steps: 10 checkpoint_every_steps: 40'
fi
cat >"$TEST_TMP/sweep.textpb" <<EOF
name: "service-check-$DEVICE"
description: "scripts/service-check.sh: the whole service end to end"
max_attempts: 3
grids { label: "dense" archs: DENSE $MODEL }
grids { label: "xmod" archs: XMOD $MODEL ks: 4 as: 1 }
training { $TRAINING seed: 1 }
data { train_glob: "$TEST_TMP/train_*.bin" val_glob: "$TEST_TMP/val_*.bin" }
EOF
"$XMOD_BIN_DIR/xmodctl" sweep submit "$TEST_TMP/sweep.textpb" >"$TEST_TMP/submit.txt" ||
  fail "xmodctl sweep submit: $(cat "$TEST_TMP/submit.txt")"
SWEEP=$(q "SELECT MAX(id) FROM sweeps")
log "sweep $SWEEP submitted: $(q "SELECT COUNT(*) FROM runs WHERE sweep_id = $SWEEP") runs on slots [$SLOTS]"
"$XMOD_BIN_DIR/xmodctl" sweep watch "$SWEEP" --no_redraw >"$TEST_TMP/watch.log" 2>&1 &
WATCH_PID=$!

# The first run to record a checkpoint while it still runs loses its worker to SIGKILL.
KILLED=""
deadline=$((SECONDS + 600))
while [[ -z "$KILLED" ]]; do
  ((SECONDS < deadline)) || fail "no run recorded a checkpoint in 600 s"
  KILLED=$(q "SELECT c.run_id FROM checkpoints c JOIN attempts a ON a.run_id = c.run_id AND
              a.attempt = c.attempt JOIN runs r ON r.id = c.run_id
              WHERE r.sweep_id = $SWEEP AND a.attempt = 1 AND a.outcome = 'running' LIMIT 1")
  [[ -n "$KILLED" ]] || sleep 0.2
done
kill -KILL "$WORKER_PID"
wait "$WORKER_PID" 2>/dev/null || true
RESUME_STEP=$(q "SELECT MAX(step) FROM checkpoints WHERE run_id = $KILLED AND attempt = 1")
log "SIGKILLed the worker while run $KILLED ran (last checkpoint: step $RESUME_STEP)"
# Its trainer outlives it until the trainer's lease lapses; the attempt ends when the
# coordinator's lease does.
wait_query "SELECT outcome != 'running' FROM attempts WHERE run_id = $KILLED AND attempt = 1" 1 120
deadline=$((SECONDS + 120))
while pgrep -f "run-$KILLED-a1" >/dev/null; do
  ((SECONDS < deadline)) || fail "run $KILLED's trainer still runs 120 s after its worker died"
  sleep 0.25
done
RESUME_STEP=$(q "SELECT MAX(step) FROM checkpoints WHERE run_id = $KILLED AND attempt = 1")
start_service_worker
log "worker restarted"

wait_query "SELECT COUNT(*) FROM runs WHERE sweep_id = $SWEEP AND state IN ('QUEUED', 'RUNNING')" 0 1800
wait_pids 30 "$WATCH_PID"
STATES=$(q "SELECT GROUP_CONCAT(state, ',') FROM (SELECT state FROM runs WHERE sweep_id = $SWEEP ORDER BY id)")
RESUMED=$(q "SELECT resumed_from_step FROM attempts WHERE run_id = $KILLED AND attempt = 2")

echo "== xmodctl runs list --sweep $SWEEP"
"$XMOD_BIN_DIR/xmodctl" runs list --sweep "$SWEEP" | tee "$TEST_TMP/runs.txt"
echo "== attempts (the results database)"
"$XMOD_BIN_DIR/xmodctl" query "SELECT a.run_id, a.attempt, a.outcome, a.resumed_from_step,
  m.slots, m.peak_gpu_memory_bytes FROM attempts a JOIN attempt_members m
  ON m.run_id = a.run_id AND m.attempt = a.attempt JOIN runs r ON r.id = a.run_id
  WHERE r.sweep_id = $SWEEP ORDER BY a.run_id, a.attempt" | tee "$TEST_TMP/attempts.txt"
echo "== the worker's GPU telemetry (/metrics)"
worker_metrics >"$TEST_TMP/worker-metrics.txt" ||
  fail "the worker's /metrics did not answer"
grep '^xmod_worker_gpu_' "$TEST_TMP/worker-metrics.txt" | tee "$TEST_TMP/gpu-metrics.txt" ||
  echo "(none: $DEVICE)"

summary_status=0
/usr/bin/python3 - "$RESULT" "$DEVICE" "$SWEEP" "$STATES" "$KILLED" "$RESUME_STEP" "${RESUMED:-}" \
  "$SLOTS" "$((SECONDS - START))" "$TEST_TMP" <<'PY' || summary_status=$?
import json, sys
out, device, sweep, states, killed, ckpt, resumed, slots, seconds, work = sys.argv[1:]
gpu = [l.split() for l in open(f"{work}/gpu-metrics.txt")] if device == "cuda" else []
summary = {
    "device": device, "sweep": int(sweep), "slots": slots, "run_states": states.split(","),
    "killed_run": int(killed), "last_checkpoint_step": int(ckpt),
    "resumed_from_step": int(resumed) if resumed else None, "seconds": int(seconds),
    "gpu_metrics": {line[0]: float(line[1]) for line in gpu if len(line) == 2},
}
summary["passed"] = (all(s == "SUCCEEDED" for s in summary["run_states"])
                     and summary["resumed_from_step"] == summary["last_checkpoint_step"] > 0
                     and (device == "cpu" or len(summary["gpu_metrics"]) > 0))
json.dump(summary, open(out, "w"), indent=2)
print(json.dumps(summary, indent=2))
sys.exit(0 if summary["passed"] else 1)
PY
if ((summary_status != 0)); then
  log "FAILED: see the summary above"
  keep_logs
  exit 1
fi
