#!/usr/bin/env bash
# A one-machine xmod cluster on loopback: one xmod-coordinator and N xmod-workers, each
# worker offering one CPU slot of one core, all on free ports.
#
#   deploy/local/cluster.sh start BUILD_DIR [--state DIR] [--workers N] [--cores N] [--auth]
#   deploy/local/cluster.sh stop [--state DIR]
#   deploy/local/cluster.sh status [--state DIR]
#
# State lives under DIR (default ./var/demo): the SQLite database, checkpoints, the workers'
# work folders, logs/ (one file per process), pids/ and ports.json; it is also the
# coordinator's --data_root (the demo corpus is DIR/corpus). With --auth, `start` makes
# credentials (docs/security.md) under DIR/secrets (mode 700): a user token for xmodctl and the
# dashboard's login, and one worker token per worker, passed as files, never as arguments.
# `start` writes DIR/env, to be sourced by a shell, with XMOD_ADDR (and XMOD_TOKEN_FILE with
# --auth) for xmodctl, and XMOD_DASHBOARD / XMOD_METRICS with the coordinator's web and
# Prometheus addresses.
# `stop` sends SIGTERM to the workers (they checkpoint and hand back running attempts), then
# to the coordinator, and SIGKILL to whatever is still alive after a grace period.
set -euo pipefail

usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[[ $# -ge 1 ]] || usage
command=$1
shift
build_dir=""
if [[ $command == start ]]; then
  [[ $# -ge 1 && $1 != --* ]] || usage
  build_dir=$1
  shift
fi
state_dir=./var/demo
workers=2
cores=1
auth=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --state) state_dir=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --cores) cores=$2; shift 2 ;;
    --auth) auth=1; shift ;;
    *) echo "cluster.sh: unknown argument $1" >&2; usage ;;
  esac
done
mkdir -p "$state_dir"
state_dir=$(cd "$state_dir" && pwd)
pid_dir=$state_dir/pids
log_dir=$state_dir/logs

# alive PIDFILE [BINARY]: the process in PIDFILE runs and, when BINARY is given, its command
# line names BINARY (so a pid reused by another program is never signalled). Just after `&`
# the child may not have exec'ed its binary yet: startup checks pass no BINARY.
alive() {
  local pidfile=$1 binary=${2:-} pid cmdline
  [[ -f $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 1
  # An exited child of this shell lingers as a zombie until reaped: not alive.
  [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]] || return 1
  [[ -z $binary ]] && return 0
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmdline == *"$binary"* ]]
}

# stop_one PIDFILE BINARY GRACE_SECONDS: SIGTERM, wait, then SIGKILL.
stop_one() {
  local pidfile=$1 binary=$2 grace=$3 pid i
  if alive "$pidfile" "$binary"; then
    pid=$(<"$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
      alive "$pidfile" "$binary" || break
      sleep 0.1
    done
    if alive "$pidfile" "$binary"; then
      echo "cluster.sh: $(basename "$pidfile" .pid) did not stop in ${grace}s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidfile"
}

stop_cluster() {
  local pidfile stoppers=()
  shopt -s nullglob
  # Workers drain in parallel; wait for those stoppers only (not for our own children).
  for pidfile in "$pid_dir"/worker-*.pid; do
    stop_one "$pidfile" xmod-worker 30 &
    stoppers+=($!)
  done
  [[ ${#stoppers[@]} -eq 0 ]] || wait "${stoppers[@]}"
  stop_one "$pid_dir/coordinator.pid" xmod-coordinator 20
  shopt -u nullglob
  rm -f "$state_dir/env"
}

# wait_for_file FILE PIDFILE NAME: until FILE exists; fails if the process died.
wait_for_file() {
  local file=$1 pidfile=$2 name=$3 i
  for ((i = 0; i < 300; i++)); do
    [[ -s $file ]] && return 0
    if ! alive "$pidfile"; then
      echo "cluster.sh: $name exited during startup; last lines of its log:" >&2
      tail -n 20 "$log_dir/$name.log" >&2 || true
      return 1
    fi
    sleep 0.1
  done
  echo "cluster.sh: $name did not write $file within 30s (log: $log_dir/$name.log)" >&2
  return 1
}

# json_port FILE KEY: the integer value of "KEY" in a one-line JSON object.
json_port() {
  sed -n "s/.*\"$2\": *\([0-9]*\).*/\1/p" "$1"
}

preflight() {
  local name
  for name in xmod-coordinator xmod-worker xmod-train; do
    [[ -x $build_dir/bin/$name ]] || {
      echo "cluster.sh: $build_dir/bin/$name not found; build it first" >&2
      exit 1
    }
  done
  if alive "$pid_dir/coordinator.pid" xmod-coordinator; then
    echo "cluster.sh: a cluster already runs under $state_dir (cluster.sh stop first)" >&2
    exit 1
  fi
}

# make_credentials DIR: a credentials file with a user credential and one worker credential
# per worker (local-1 ...), and each one's token in DIR/NAME.token, all readable by us only.
make_credentials() {
  local dir=$1 i name secret
  (
    umask 077
    mkdir -p "$dir"
    : >"$dir/credentials"
    for name in user $(for ((i = 1; i <= workers; i++)); do echo "local-$i"; done); do
      secret=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
      if [[ $name == user ]]; then
        echo "user ${USER:-me}-local $secret" >>"$dir/credentials"
      else
        echo "worker $name $secret" >>"$dir/credentials"
      fi
      echo "$secret" >"$dir/$name.token"
    done
  )
}

start_cluster() {
  local bin name i
  bin=$(cd "$build_dir/bin" && pwd)
  mkdir -p "$pid_dir" "$log_dir" "$state_dir/checkpoints" "$state_dir/workers"
  rm -f "$state_dir/ports.json" "$state_dir/env"
  local secrets=$state_dir/secrets coordinator_auth=()
  if [[ $auth == 1 ]]; then
    make_credentials "$secrets"
    coordinator_auth=(--credentials_file "$secrets/credentials")
  fi

  "$bin/xmod-coordinator" --listen 127.0.0.1:0 --http_listen 127.0.0.1:0 \
    --metrics_listen 127.0.0.1:0 --ports_file "$state_dir/ports.json" \
    --db "$state_dir/xmod.db" --checkpoint_root "$state_dir/checkpoints" \
    --data_root "$state_dir" \
    "${coordinator_auth[@]}" >"$log_dir/coordinator.log" 2>&1 &
  echo $! >"$pid_dir/coordinator.pid"
  wait_for_file "$state_dir/ports.json" "$pid_dir/coordinator.pid" coordinator
  local grpc http metrics
  grpc=$(json_port "$state_dir/ports.json" grpc)
  http=$(json_port "$state_dir/ports.json" http)
  metrics=$(json_port "$state_dir/ports.json" metrics)
  local addr=127.0.0.1:$grpc

  for ((i = 1; i <= workers; i++)); do
    name=worker-$i
    local worker_auth=()
    [[ $auth == 1 ]] && worker_auth=(--token_file "$secrets/local-$i.token")
    mkdir -p "$state_dir/workers/$name"
    rm -f "$state_dir/workers/$name/ports.json"
    OMP_NUM_THREADS=$cores MKL_NUM_THREADS=$cores \
      "$bin/xmod-worker" --coordinator "$addr" --name "local-$i" \
      --work_dir "$state_dir/workers/$name" --train_bin "$bin/xmod-train" \
      --cpu_slots 1 --cores_per_slot "$cores" --gpus=false \
      --metrics_listen 127.0.0.1:0 --ports_file "$state_dir/workers/$name/ports.json" \
      "${worker_auth[@]}" >"$log_dir/$name.log" 2>&1 &
    echo $! >"$pid_dir/$name.pid"
  done
  for ((i = 1; i <= workers; i++)); do
    wait_for_file "$state_dir/workers/worker-$i/ports.json" "$pid_dir/worker-$i.pid" "worker-$i"
  done

  {
    echo "export XMOD_ADDR=$addr"
    [[ $auth == 1 ]] && echo "export XMOD_TOKEN_FILE=$secrets/user.token"
    echo "export XMOD_DASHBOARD=http://127.0.0.1:$http/"
    echo "export XMOD_METRICS=http://127.0.0.1:$metrics/metrics"
  } >"$state_dir/env"
  echo "cluster: coordinator at $addr (dashboard http://127.0.0.1:$http/), $workers worker(s)" \
    "x $cores core(s); logs in $log_dir"
  echo "cluster: source $state_dir/env to point xmodctl at it"
}

status_cluster() {
  local pidfile code=0
  shopt -s nullglob
  if [[ ! -f $pid_dir/coordinator.pid ]]; then
    echo "no cluster under $state_dir"
    code=1
  fi
  for pidfile in "$pid_dir"/*.pid; do
    local name binary
    name=$(basename "$pidfile" .pid)
    binary=xmod-worker
    [[ $name == coordinator ]] && binary=xmod-coordinator
    if alive "$pidfile" "$binary"; then
      echo "$name: running (pid $(<"$pidfile"))"
    else
      echo "$name: not running"
      code=1
    fi
  done
  shopt -u nullglob
  [[ -f $state_dir/env ]] && cat "$state_dir/env"
  return $code
}

case $command in
  start)
    preflight
    # A failed start leaves nothing running.
    started=0
    trap '[[ $started == 1 ]] || stop_cluster' EXIT
    start_cluster
    started=1
    ;;
  stop) stop_cluster ;;
  status) status_cluster ;;
  *) usage ;;
esac
