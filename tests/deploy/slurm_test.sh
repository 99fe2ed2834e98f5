#!/usr/bin/env bash
# Workers under a real Slurm, on this machine as a one-node cluster. Makes a munge key and a
# one-node slurm.conf (this host, its CPUs, select/cons_tres, no cgroups, free ports, all state
# under the test's temp folder), starts munged, slurmctld and slurmd as root, a coordinator on
# loopback, and submits workers with deploy/slurm/submit-workers.sh. The node has two
# stand-in GPUs (gres.conf devices that are links to /dev/null, and an nvidia-smi on the GPU
# worker's PATH that lists both). Checks:
#   - a worker submitted with --gres=gpu:1 offers one CUDA slot, the GPU Slurm allocated
#     (SLURM_JOB_GPUS), not both that nvidia-smi lists, with the allocation's CPUs;
#   - two workers submitted with --cpus-per-task=1 and no GPU (their trainer worker/fake_train,
#     paced to a few seconds a run) each offer one CPU slot of one core, not the machine;
#   - a 3-run sweep runs on the workers Slurm started;
#   - a scancel of the job whose worker holds a running attempt is a worker loss: that attempt
#     ends preempted (no failure counted), the run is requeued, resumes on the other worker
#     from its checkpoint and succeeds there;
#   - every run succeeds.
# Exits 77 (ctest: skipped, with the reason printed) only when not root: munged, slurmctld and
# slurmd are started as root. Installs slurm-wlm and munge with apt-get when missing. Every
# daemon and job is stopped on exit; KEEP_TMP=1 keeps the logs. Prints its wall time.
set -euo pipefail
SRC=${XMOD_SOURCE_DIR:?}
FAKE_TRAIN=${XMOD_FAKE_TRAIN:?path of the fake_train test binary}
test_start=$SECONDS
if [[ $(id -u) != 0 ]]; then
  echo "SKIP: slurm_test starts munged, slurmctld and slurmd as root; running as uid $(id -u)"
  exit 77
fi
export PATH=$PATH:/usr/sbin:/sbin
missing=()
command -v slurmctld >/dev/null || missing+=(slurm-wlm)
command -v munged >/dev/null || missing+=(munge)
if ((${#missing[@]})); then
  echo "slurm_test: installing ${missing[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
    >/dev/null
fi
source "$SRC/tests/lib/cluster.sh"
XMODCTL=$XMOD_BIN_DIR/xmodctl
SLURM_DIR=$TEST_TMP/slurm
mkdir -p "$SLURM_DIR"/{munge,ctld,spool,logs}
chmod 700 "$SLURM_DIR/munge"
DAEMON_PIDS=()

fail() {
  echo "FAIL: $*" >&2
  for log in "$SLURM_DIR"/logs/* "$TEST_TMP/coordinator.log"; do
    echo "--- $log (last 25 lines) ---" >&2
    tail -n 25 "$log" >&2 || true
  done
  exit 1
}

# The jobs first (their workers drain), then the daemons, then cluster.sh's cleanup.
stop_slurm() {
  local pid i
  if [[ -n ${SLURM_CONF:-} ]] && ((${#DAEMON_PIDS[@]})); then
    scancel --quiet --user=root 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
      sleep 0.2
    done
  fi
  for ((i = ${#DAEMON_PIDS[@]} - 1; i >= 0; i--)); do
    stop_pids 20 "${DAEMON_PIDS[i]}"
  done
  # A job step that outlived slurmd (it should not) is this test's: its command line names
  # this test's temp folder.
  for pid in $(pgrep -f -- "--work_dir=$TEST_TMP/" || true); do kill -KILL "$pid" 2>/dev/null || true; done
  cleanup
}
trap stop_slurm EXIT

# query SQL: the coordinator's answer as CSV rows without the header.
query() { "$XMODCTL" -o csv query "$1" | tail -n +2; }

# --- munge and Slurm, configured for this machine ------------------------------------------
node=$(hostname -s)
# Two CPUs at least, so that two one-CPU workers run at once; slurmd takes the node as
# configured (config_overrides) even if the machine has fewer.
cpus=$(($(nproc) > 2 ? $(nproc) : 2))
head -c 1024 /dev/urandom >"$SLURM_DIR/munge/munge.key"
chmod 400 "$SLURM_DIR/munge/munge.key"
munge_socket=$SLURM_DIR/munge/munge.socket
munged --foreground --force --key-file="$SLURM_DIR/munge/munge.key" --socket="$munge_socket" \
  --pid-file="$SLURM_DIR/munge/munged.pid" --seed-file="$SLURM_DIR/munge/munged.seed" \
  --log-file="$SLURM_DIR/logs/munged.log" >>"$SLURM_DIR/logs/munged.log" 2>&1 &
DAEMON_PIDS+=($!)
munge_roundtrip() { munge -S "$munge_socket" -n | unmunge -S "$munge_socket"; }
wait_until 20 "munged to answer on $munge_socket" munge_roundtrip

# Two stand-in GPUs: Slurm needs a device file per GPU (it only stats them without cgroups).
mkdir -p "$SLURM_DIR/dev" "$SLURM_DIR/fakebin"
ln -s /dev/null "$SLURM_DIR/dev/nvidia0"
ln -s /dev/null "$SLURM_DIR/dev/nvidia1"
echo "Name=gpu File=$SLURM_DIR/dev/nvidia[0-1]" >"$SLURM_DIR/gres.conf"
cat >"$SLURM_DIR/fakebin/nvidia-smi" <<'SMI'
#!/bin/sh
# The node's two GPUs as `nvidia-smi --query-gpu=index,name,memory.total --format=csv,...`.
printf '0, Stand-in GPU, 1024\n1, Stand-in GPU, 1024\n'
SMI
chmod +x "$SLURM_DIR/fakebin/nvidia-smi"

# No cgroups (a container may not delegate them): processes are tracked by their parentage.
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [[ $slurmd_port == "$ctld_port" ]]; do slurmd_port=$(free_port); done
export SLURM_CONF=$SLURM_DIR/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=xmodtest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_socket
StateSaveLocation=$SLURM_DIR/ctld
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=10
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus Gres=gpu:2 State=UNKNOWN
PartitionName=xmod Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -D -i >"$SLURM_DIR/logs/slurmctld.log" 2>&1 &
DAEMON_PIDS+=($!)
wait_until 30 "slurmctld to answer" scontrol ping
slurmd -D >"$SLURM_DIR/logs/slurmd.log" 2>&1 &
DAEMON_PIDS+=($!)
node_idle() { [[ $(sinfo -h -n "$node" -o %t) == idle ]]; }
wait_until 30 "slurmd to register $node as idle" node_idle
echo "slurm_test: munged, slurmctld and slurmd up on $node ($cpus CPUs) after" \
  "$((SECONDS - test_start)) s"

# --- the coordinator, on loopback ------------------------------------------------------------
use_credentials "$node-1" "$node-2" "$node-gpu-1"
start_coordinator --lease_ttl_ms=10000 --heartbeat_interval_ms=1000
corpus=$TEST_TMP/corpus
mkdir -p "$corpus" "$TEST_TMP/jobs"
: >"$corpus/c_train_000.bin"  # the coordinator checks that the globs match; fake_train reads none
: >"$corpus/c_val_000.bin"
# slots_of NAME: the slots worker NAME registered, as protobuf text.
slots_of() {
  local hex
  hex=$(query "SELECT hex(slots) FROM workers WHERE name = '$1'")
  /usr/bin/python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(sys.argv[1]))' "$hex" |
    protoc --decode=xmod.v1.RegisterRequest -I "$SRC/proto" xmod/v1/worker.proto
}
registered() { [[ -n $(query "SELECT id FROM workers WHERE name = '$1'") ]]; }
job_gone() { [[ -z $(squeue -h -j "$1" -o %T 2>/dev/null) ]]; }
# submit ENV_ASSIGNMENT... -- SBATCH_OPTION...: submit-workers.sh for this test's coordinator;
# prints the array job id. The time limit stays well above the sbatch file's 600 s warning
# (--signal=B:TERM@600), which would otherwise drain the workers at once.
submit() {
  local assignments=() out
  while [[ $1 != -- ]]; do assignments+=("$1"); shift; done
  shift
  out=$(env XMOD_TOKEN_DIR="$TEST_TMP" XMOD_WORK_DIR="$TEST_TMP/jobs" \
    XMOD_WORKER_METRICS=127.0.0.1:0 "${assignments[@]}" \
    "$SRC/deploy/slurm/submit-workers.sh" "$@" --time=30 \
    --output="$SLURM_DIR/logs/xmod-worker-%A_%a.log")
  [[ ${out##* } =~ ^[0-9]+$ ]] || fail "submit-workers.sh printed \"$out\""
  echo "${out##* }"
}

# --- a GPU worker: one of the node's two GPUs allocated --------------------------------------
# A job holding GPU 0 first, so that the worker's allocation is GPU 1: not the first GPU
# nvidia-smi lists.
holder=$(sbatch --parsable --gres=gpu:1 --cpus-per-task=1 --time=30 --output=/dev/null \
  --wrap 'sleep 600')
holder_running() { [[ $(squeue -h -j "$holder" -o %T) == RUNNING ]]; }
wait_until 30 "the job holding GPU 0 to run" holder_running
gpu_job=$(submit PATH="$SLURM_DIR/fakebin:$PATH" XMOD_WORKER_NAME="$node-gpu-%a" -- \
  1 "$XMOD_ADDR" --gres=gpu:1 --cpus-per-task=1)
wait_until 60 "the GPU worker to register" registered "$node-gpu-1"
allocated_gpu=$(scontrol show job -d "${gpu_job}_1" | sed -n 's/.*GRES=gpu[^(]*(IDX:\([0-9]*\)).*/\1/p' | head -n 1)
[[ $allocated_gpu == 1 ]] || fail "job ${gpu_job}_1 should hold GPU 1; scontrol: $allocated_gpu"
slots=$(slots_of "$node-gpu-1")
device=$(sed -n 's/^ *device: //p' <<<"$slots")
[[ $(grep -c '^slots {' <<<"$slots") == 1 && $slots == *"kind: CUDA"* &&
   ${device:-0} == "$allocated_gpu" && $slots == *"cores: 1"$'\n'* ]] ||
  fail "worker $node-gpu-1 should offer one CUDA slot, GPU $allocated_gpu, of 1 core: $slots"
echo "slurm_test: the --gres=gpu:1 worker offers one CUDA slot, GPU $allocated_gpu as" \
  "allocated (nvidia-smi lists GPUs 0 and 1), with 1 core"
scancel "${gpu_job}_1" "$holder"
wait_until 30 "the GPU worker's job to end" job_gone "${gpu_job}_1"
wait_until 30 "the job holding GPU 0 to end" job_gone "$holder"

# --- two CPU workers through the README's sbatch file -------------------------------------
steps=12
step_ms=400
array_job=$(submit XMOD_WORKER_NAME="$node-%a" \
  XMOD_WORKER_FLAGS="--train_bin=$FAKE_TRAIN --train_env=FAKE_TRAIN_STEPS=$steps,FAKE_TRAIN_STEP_MS=$step_ms" \
  -- 2 "$XMOD_ADDR" --gres=none --cpus-per-task=1)
echo "slurm_test: submitted job array $array_job (2 workers)"
wait_until 60 "worker $node-1 to register" registered "$node-1"
wait_until 60 "worker $node-2 to register" registered "$node-2"
echo "slurm_test: both workers registered after $((SECONDS - test_start)) s"

# Each registered with what its allocation holds (1 CPU), not the machine's cores.
for name in "$node-1" "$node-2"; do
  slots=$(slots_of "$name")
  [[ $(grep -c '^slots {' <<<"$slots") == 1 && $slots == *"kind: CPU"* &&
     $slots == *"cores: 1"$'\n'* ]] ||
    fail "worker $name should offer one CPU slot of 1 core (--cpus-per-task=1); it offers: $slots"
done
echo "slurm_test: each worker offers 1 CPU slot of 1 core, as allocated (the machine has $(nproc))"

# --- a tiny sweep; scancel the job whose worker runs an attempt -----------------------------
cat >"$TEST_TMP/sweep.textpb" <<SPEC
name: "slurm"
description: "slurm_test: three short runs on the fake trainer"
grids { label: "dense" archs: DENSE backbones: "tiny-test" seq_lens: [64, 128] }
grids { label: "xmod" archs: XMOD backbones: "tiny-test" seq_lens: 64 ks: 2 as: 1 }
training { flop_budget: 3e9 seq_len: 64 batch_tokens: 128 eval_marks: 2 }
data { train_glob: "$corpus/*_train_*.bin" val_glob: "$corpus/*_val_*.bin" }
max_attempts: 3
SPEC
sweep=$("$XMODCTL" -o json sweep submit "$TEST_TMP/sweep.textpb" |
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["sweep_id"])')
# A running attempt that has reported at least two steps and at most half of them (so it is
# mid-run, with steps done, and seconds of steps ahead: it is still running at the scancel).
# Read once: the answer is the victim (another read may find that attempt gone).
pick_victim() {
  victim=$(query "SELECT a.run_id, a.worker FROM attempts a WHERE a.outcome = 'running'
                  AND (SELECT COUNT(*) FROM metrics m WHERE m.run_id = a.run_id
                       AND m.attempt = a.attempt) BETWEEN 2 AND $((steps / 2))
                  ORDER BY a.run_id LIMIT 1")
  [[ -n $victim ]]
}
wait_until 60 "an attempt to be running with two steps reported" pick_victim
IFS=, read -r victim_run victim_worker <<<"$victim"
task=${victim_worker##*-}
[[ $(squeue -h -j "${array_job}_$task" -o %T) == RUNNING ]] ||
  fail "job ${array_job}_$task of worker $victim_worker is not RUNNING"
echo "slurm_test: run $victim_run is mid-run on $victim_worker; scancel ${array_job}_$task"
scancel_at=$SECONDS
scancel "${array_job}_$task"

sweep_over() {
  [[ $(query "SELECT COUNT(*) FROM runs WHERE sweep_id = $sweep
              AND state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')") == 0 ]]
}
wait_until 120 "every run of sweep $sweep to end" sweep_over
echo "slurm_test: sweep $sweep ended $((SECONDS - scancel_at)) s after the scancel"
wait_until 30 "the cancelled job to leave the queue" job_gone "${array_job}_$task"

# --- what happened to the cancelled worker's run, and to the sweep --------------------------
not_succeeded=$(query "SELECT id, state FROM runs WHERE sweep_id = $sweep AND state != 'SUCCEEDED'")
[[ -z $not_succeeded ]] || fail "runs that did not succeed: $not_succeeded"
[[ $(query "SELECT COUNT(*) FROM runs WHERE sweep_id = $sweep") == 3 ]] || fail "expected 3 runs"
attempts=$(query "SELECT attempt, worker, outcome, exit_code, resumed_from_step FROM attempts
                  WHERE run_id = $victim_run ORDER BY attempt")
echo "slurm_test: run $victim_run attempts (attempt,worker,outcome,exit_code,resumed_from_step):"
sed 's/^/  /' <<<"$attempts"
# Slurm signals every process of the job: the trainer gets SIGTERM straight from Slurm as well
# as from the draining worker, checkpoints and exits 75. Whichever the worker saw first, the
# attempt ends as a preemption: PREEMPTED, or exit 75 (kExitPreempted), which the coordinator
# requeues without counting a failure.
IFS=, read -r first_attempt first_worker first_outcome first_exit _ <<<"$(head -n 1 <<<"$attempts")"
[[ $first_attempt == 1 && $first_worker == "$victim_worker" &&
   ($first_outcome == preempted || $first_exit == 75) ]] ||
  fail "attempt 1 of run $victim_run should end preempted (or exit 75) on $victim_worker"
IFS=, read -r last_attempt last_worker last_outcome _ last_resumed <<<"$(tail -n 1 <<<"$attempts")"
[[ $last_attempt -ge 2 && $last_worker != "$victim_worker" && $last_outcome == succeeded ]] ||
  fail "run $victim_run should succeed on the other worker after the loss"
[[ $last_resumed -gt 0 ]] || fail "run $victim_run should resume from its checkpoint on $last_worker"
run_row=$(query "SELECT attempts, failures FROM runs WHERE id = $victim_run")
[[ $run_row == "$last_attempt,0" ]] ||
  fail "run $victim_run: attempts,failures should be $last_attempt,0 (a preemption is no failure): $run_row"
other_task=$((3 - task))
[[ $(squeue -h -j "${array_job}_$other_task" -o %T) == RUNNING ]] ||
  fail "the other worker's job ${array_job}_$other_task should still run: only one job was cancelled"
grep -q "draining" "$SLURM_DIR/logs/xmod-worker-${array_job}_$task.log" ||
  fail "the cancelled worker's log shows no drain"
echo "slurm_test: PASS: scancel was a worker loss; run $victim_run resumed on $last_worker" \
  "and succeeded; all 3 runs SUCCEEDED; wall time $((SECONDS - test_start)) s"
