#!/usr/bin/env bash
# Makes the upgrade test's fixture of one earlier schema version (tests/upgrade/README.md):
# builds that version's own xmod-coordinator, xmodctl, xmod-worker and fake_train from the
# project's history in a detached git worktree, runs a scripted scenario with those binaries
# on loopback, and keeps what they wrote under tests/upgrade/fixtures/vV/: the database
# (WAL checkpointed into the one file, gzipped), the checkpoint files of the one run left
# unfinished, and a MANIFEST with the commit, every command run and the rows per table.
# Run by hand, once per version (never in CI, never by the test):
#
#   tests/upgrade/make_fixture.sh V COMMIT      # e.g. 9 3422533
#
# Environment: OLD_TREE (the worktree; default /tmp/xmod-upgrade-old-vV, removed at the end
# unless KEEP_OLD=1, reused when it already holds a build), BUILD_ONLY=1 (stop after the
# build, keeping the tree), JOBS (ninja's -j, default 2). Builds run under nice with ccache.
#
# The scenario, each part where that version has it: a sweep of 10 runs trained by
# fake_train (its law mode from version 4, so that fits succeed; before, its ok mode and the
# fits stored are errors) and fitted; a second sweep and a study of both (version 2), with a
# shared run (7) and a ProposeRuns decision (4); two users' sweeps under a sharing config, a
# non-preemptible run and one priority preemption (8; with version 9 the events' actors and
# the study's owner); and last one run left unfinished: its first attempt drained by the
# worker's SIGTERM (the trainer writes a checkpoint, the run is queued again), its second
# attempt running when its worker is frozen, the coordinator stopped and the worker and its
# trainer SIGKILLed.
# Every process runs in the fixture's folder with --checkpoint_root=checkpoints, so the
# database stores checkpoint paths relative to that folder (the test runs today's daemons in
# a copy of it).
set -euo pipefail

if (($# != 2)); then
  echo "usage: $0 V COMMIT  (e.g. $0 9 3422533)" >&2
  exit 2
fi
V=$1
COMMIT=$(git rev-parse --verify "$2^{commit}")
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$REPO/tests/upgrade/fixtures/v$V
OLD_TREE=${OLD_TREE:-/tmp/xmod-upgrade-old-v$V}
JOBS=${JOBS:-2}

# --- the old binaries ------------------------------------------------------------------------

# Changes made to the old tree before building, one line each (also in the MANIFEST).
PATCHES=()

# fake_train before version 5 reports its checkpoints without writing the file or a digest
# (xmod-train always wrote both; today's worker offers no checkpoint without a digest): it
# is made to write its one-byte file and report the file's SHA-256, as fake_train does from
# version 5 on.
# Recorded whether it is made now or was made when the kept tree was built.
patch_fake_train() {
  local file=$OLD_TREE/worker/fake_train.cc
  PATCHES+=("worker/fake_train.cc: Checkpoint() writes its one-byte file and sets its sha256")
  grep -q 'set_sha256' "$file" && return 0
  perl -0pi -e 's/(\n(\s*)cp->set_bytes\(1\);)/$1\n$2xmod::WriteFileAtomic(cp->path(), "x").IgnoreError();\n$2cp->set_sha256(xmod::Sha256Hex("x"));/' "$file"
  grep -q 'set_sha256' "$file"
}

build_old() {
  if [ ! -d "$OLD_TREE" ]; then
    git -C "$REPO" worktree add --detach "$OLD_TREE" "$COMMIT" >/dev/null
  fi
  [ "$(git -C "$OLD_TREE" rev-parse HEAD)" = "$COMMIT" ] || {
    echo "$OLD_TREE is not at $COMMIT" >&2
    exit 1
  }
  # The toolchain's npm packages and LibTorch venv are found through .cache, as in the tree.
  [ -e "$OLD_TREE/.cache" ] || ln -s "$REPO/.cache" "$OLD_TREE/.cache"
  ((V >= 5)) || patch_fake_train
  export CCACHE_BASEDIR=$OLD_TREE
  # -O1: quicker to compile than the project's -O2; these binaries only run the scenario.
  # From version 5 the store links xmod_train_core, which only a LibTorch build defines, so
  # LibTorch is enabled there (found through .cache as in the tree; only the four targets
  # below are built, none of the model's LibTorch code); before, the trees found LibTorch
  # elsewhere and need none.
  local torch=OFF
  ((V >= 5)) && torch=ON
  nice cmake -S "$OLD_TREE" -B "$OLD_TREE/build" -G Ninja -DCMAKE_BUILD_TYPE=None \
    -DCMAKE_CXX_FLAGS="-O1 -DNDEBUG" -DCMAKE_C_FLAGS="-O1 -DNDEBUG" \
    -DXMOD_WITH_TORCH=$torch -DXMOD_BUILD_BENCH=OFF -DXMOD_BUILD_TESTS=ON >/dev/null
  nice ninja -C "$OLD_TREE/build" -j "$JOBS" xmod-coordinator xmodctl xmod-worker fake_train
}

# --- running them ----------------------------------------------------------------------------

# Where the scenario runs: a fixed path, as the sweep specs name their data files by it.
GEN=/tmp/xmod-upgrade-fixture
BIN=$OLD_TREE/build/bin
FAKE_TRAIN=$OLD_TREE/build/tests/fake_train
COORD_PID=   # the running coordinator; every other background job is a worker

# At exit: the workers still running, then the coordinator, then the old tree.
cleanup() {
  local pid
  for pid in $(jobs -p); do
    [ "$pid" = "$COORD_PID" ] || stop_pid "$pid"
  done
  [ -z "$COORD_PID" ] || stop_pid "$COORD_PID"
  if [ "${KEEP_OLD:-0}" != 1 ] && [ -d "$OLD_TREE" ]; then
    git -C "$REPO" worktree remove --force "$OLD_TREE"
  fi
}

# log CMD...: runs CMD, recording it in the MANIFEST's command list (environment assignments
# first, as `env` takes them).
log() {
  printf '%s\n' "$*" >>"$GEN/commands.log"
  env "$@"
}

# spawn CMD...: as log, but replaces the shell it runs in; started as `(spawn CMD...) &`, so
# that $! is the daemon's own pid (signals sent to it reach the daemon, not a subshell).
spawn() {
  printf '%s\n' "$*" >>"$GEN/commands.log"
  exec env "$@"
}

# stop_pid PID: SIGTERM, then SIGKILL after 60 s.
stop_pid() {
  local deadline=$((SECONDS + 60))
  kill -TERM "$1" 2>/dev/null || return 0
  while kill -0 "$1" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# wait_exit PID SECONDS: until PID has exited by itself, then stop_pid.
wait_exit() {
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  stop_pid "$1"
}

sql() { sqlite3 -readonly "$GEN/xmod.db" "$@"; }

# wait_sql SECONDS QUERY: until QUERY prints 1.
wait_sql() {
  local deadline=$((SECONDS + $1))
  until [ "$(sql "$2" 2>/dev/null)" = 1 ]; do
    if ((SECONDS > deadline)); then
      echo "make_fixture: timed out waiting for: $2" >&2
      tail -n 30 "$GEN"/logs/*.log >&2
      exit 1
    fi
    sleep 0.3
  done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# as USER: the token file xmodctl reads (credentials from version 8 on).
as() { ((V >= 8)) && echo "XMOD_TOKEN_FILE=secrets/$1.token" || echo "XMOD_TOKEN_FILE="; }

start_coordinator() {
  local auth=()
  ((V >= 8)) && auth=(--credentials_file=secrets/credentials --sharing_config=sharing.txtpb)
  (spawn "$BIN/xmod-coordinator" --listen=127.0.0.1:0 --http_listen=127.0.0.1:0 \
    --metrics_listen=127.0.0.1:0 --db=xmod.db --checkpoint_root=checkpoints \
    --ports_file=ports.json --heartbeat_interval_ms=500 --lease_ttl_ms=3000 "${auth[@]}") \
    >logs/coordinator.log 2>&1 &
  COORD_PID=$!
  local deadline=$((SECONDS + 60))
  until [ -s ports.json ]; do
    ((SECONDS < deadline)) || { cat logs/coordinator.log >&2; exit 1; }
    sleep 0.2
  done
  export XMOD_ADDR=127.0.0.1:$(python3 -c 'import json; print(json.load(open("ports.json"))["grpc"])')
}

# start_worker NAME SLOTS VAR=VALUE...: a worker in a session of its own (so that its
# trainers can be killed with it), fake_train's settings in its environment; sets WORKER_PID.
start_worker() {
  local name=$1 slots=$2 token=()
  shift 2
  ((V >= 8)) && token=(--token_file="secrets/$name.token")
  (spawn "$@" setsid "$BIN/xmod-worker" --coordinator="$XMOD_ADDR" --name="$name" \
    --work_dir="workers/$name" --cpu_slots="$slots" --cores_per_slot=1 \
    --train_bin="$FAKE_TRAIN" --metrics_listen="127.0.0.1:$(free_port)" "${token[@]}") \
    >"logs/$name.log" 2>&1 &
  WORKER_PID=$!
}

# submit USER FILE: submits a sweep spec; prints nothing.
submit() {
  log $(as "$1") "$BIN/xmodctl" sweep submit "$2" >>logs/xmodctl.log
}

# Sweep specs: every run is a point of cpu-d64's grid; the data files exist (coordinators
# check the globs) and are never read (fake_train).
write_spec() {  # NAME FILE GRIDS [EXTRA]
  cat >"$2" <<SPEC
name: "$1"
description: "upgrade fixture (tests/upgrade/make_fixture.sh)"
$3
training { flop_budget: 1e11 batch_tokens: 512 eval_marks: 2 eval_tokens: 1024 seed: 1 }
data { train_glob: "$GEN/data/train_*.bin" val_glob: "$GEN/data/val_*.bin" }
max_attempts: 3
${4:-}
SPEC
}

DENSE='grids { label: "dense" archs: DENSE backbones: "cpu-d64" seq_lens: [64, 128] }'
KXL='grids { label: "kxl" archs: XMOD backbones: "cpu-d64" seq_lens: [64, 128] ks: [2, 4, 8, 16] as: 1 }'
AXK='grids { label: "axk" archs: XMOD backbones: "cpu-d64" seq_lens: [64, 128] ks: [2, 4] as: 0.5 }'
ONE_RUN='grids { label: "one" archs: DENSE backbones: "cpu-d64" seq_lens: [256] }'
# The law fake_train's law mode draws the sparse runs' Δ from (docs/paper-fidelity.md).
LAW='{"e": -0.0382, "u": 0.715, "eta_n": 0.0545, "rho_n": 0.609, "w": 3.505, "eta_l": 0.1965, "rho_l": 0.05, "z": 0.002, "rho_k": 0.353, "rho_a": 1.09}'

# fit_env: fake_train's settings for runs with validation losses (its law mode from
# version 4; before, its ok mode: train/loss only).
fit_env() {
  if ((V >= 4)); then
    echo FAKE_TRAIN_MODE=law FAKE_TRAIN_LAW=$GEN/law.json FAKE_TRAIN_STEPS=4
  else
    echo FAKE_TRAIN_MODE=ok FAKE_TRAIN_STEPS=4
  fi
}

# slow_env: runs that take a while and checkpoint when SIGTERMed (before version 4: the
# term mode, which only waits for SIGTERM and then checkpoints step 1).
slow_env() {
  if ((V >= 4)); then
    echo FAKE_TRAIN_MODE=ok FAKE_TRAIN_STEPS=${1:-1000} FAKE_TRAIN_STEP_MS=200 \
      $( ((V >= 8)) && echo FAKE_TRAIN_RESUME=1)
  else
    echo FAKE_TRAIN_MODE=term
  fi
}

# Run ids by sweep and state.
runs_of() { sql "SELECT group_concat(id) FROM runs WHERE sweep_id = $1 ${2:+AND state = '$2'}"; }
all_done() { echo "SELECT count(*) = 0 FROM runs WHERE sweep_id = $1 AND state IN ('QUEUED', 'RUNNING')"; }
sweep_id() { sql "SELECT max(id) FROM sweeps WHERE name = '$1'"; }

scenario() {
  rm -rf "$GEN"
  mkdir -p "$GEN"/{data,logs,secrets}
  cd "$GEN"
  : >data/train_000.bin
  : >data/val_000.bin
  echo "$LAW" >law.json
  if ((V >= 8)); then
    local entry
    (
      umask 077
      for entry in user:alice user:bob worker:w-fit worker:w-share worker:w-drain \
        worker:w-crash $( ((V >= 9)) && echo admin:operator); do
        local secret
        secret=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
        echo "${entry%%:*} ${entry#*:} $secret" >>secrets/credentials
        echo "$secret" >"secrets/${entry#*:}.token"
      done
    )
    cat >sharing.txtpb <<'CFG'
users { name: "alice" cpu_slots: 4 weight: 2 }
users { name: "bob" cpu_slots: 2 weight: 1 }
min_run_ms: 0
CFG
  fi
  start_coordinator

  # 1. A fitted sweep: Dense and X-MoD A = 1 at two contexts; its own fit has no A != 1
  # rows, so the fit stored once it is done is an error (a study fit below succeeds).
  write_spec upgrade-kxl kxl.textpb "$DENSE
$KXL" 'fit { enabled: true seed: 1 }'
  submit alice kxl.textpb
  local kxl
  kxl=$(sweep_id upgrade-kxl)
  start_worker w-fit 2 $(fit_env)
  wait_sql 300 "$(all_done "$kxl")"
  wait_sql 120 "SELECT count(*) > 0 FROM fits WHERE sweep_id = $kxl"
  stop_pid "$WORKER_PID"

  # 2. A second sweep and a study of both (kxl and axk roles): the second sweep's dense runs
  # are the first one's configurations (version 7: linked to them and cancelled, as no run
  # of the second sweep has started). The study's fit and a ProposeRuns decision under it.
  if ((V >= 2)); then
    write_spec upgrade-axk axk.textpb "$DENSE
$AXK"
    submit alice axk.textpb
    local axk
    axk=$(sweep_id upgrade-axk)
    # From version 10 a study whose members' fit seeds differ needs its own (the first's).
    log $(as alice) "$BIN/xmodctl" study create upgrade-study --member "kxl=$kxl" \
      --member "axk=$axk" $( ((V >= 10)) && echo --seed 1) >>logs/xmodctl.log
    start_worker w-fit 2 $(fit_env)
    wait_sql 300 "$(all_done "$axk")"
    wait_sql 180 "SELECT count(*) > 0 FROM fits WHERE study_id IS NOT NULL"
    if ((V >= 4)); then  # a decision is stored when its proposals are submitted, as runs
      log $(as alice) "$BIN/xmodctl" fit propose "$axk" --study upgrade-study \
        --target 1e11:128:cpu-d64 --count 2 --submit >>logs/xmodctl.log
      wait_sql 10 "SELECT count(*) > 0 FROM design_decisions"
      wait_sql 300 "$(all_done "$axk")"
    fi
    stop_pid "$WORKER_PID"
  fi

  # 3. Sharing (version 8): bob's run is preempted by alice's higher-priority,
  # non-preemptible one; both then succeed (bob's resumed from its checkpoint).
  if ((V >= 8)); then
    write_spec upgrade-low low.textpb "$ONE_RUN"
    write_spec upgrade-high high.textpb "$ONE_RUN" 'priority: 5 preemptible: false'
    sed -i 's/seed: 1 }/seed: 2 }/' high.textpb
    submit bob low.textpb
    local low
    low=$(sweep_id upgrade-low)
    start_worker w-share 1 $(slow_env 100)  # long enough to be running when alice submits
    wait_sql 120 "SELECT count(*) > 0 FROM metrics m JOIN runs r ON r.id = m.run_id
                  WHERE r.sweep_id = $low AND m.step >= 10"
    submit alice high.textpb
    local high
    high=$(sweep_id upgrade-high)
    wait_sql 30 "SELECT count(*) > 0 FROM attempts WHERE preempt_reason IS NOT NULL"
    wait_sql 300 "SELECT count(*) = 2 FROM runs WHERE sweep_id IN ($low, $high)
                  AND state = 'SUCCEEDED'"
    stop_pid "$WORKER_PID"
  fi

  # 4. The unfinished run: its first attempt drained by the worker's SIGTERM (the trainer
  # checkpoints and exits 75; the run is queued again), its second attempt running when its
  # worker is frozen (so that it reports nothing), then SIGKILLed with its trainer.
  write_spec upgrade-unfinished unfinished.textpb "$ONE_RUN"
  sed -i 's/seed: 1 }/seed: 3 }/' unfinished.textpb
  submit alice unfinished.textpb
  local unfinished run
  unfinished=$(sweep_id upgrade-unfinished)
  run=$(runs_of "$unfinished")
  start_worker w-drain 1 $(slow_env)
  if ((V >= 4)); then
    wait_sql 120 "SELECT max(step) >= 3 FROM metrics WHERE run_id = $run"
  else
    wait_sql 120 "SELECT count(*) = 1 FROM attempts WHERE run_id = $run AND outcome = 'running'"
  fi
  # One SIGTERM: the worker drains (a second would stop it waiting for its reports).
  log kill -TERM "$WORKER_PID"
  wait_exit "$WORKER_PID" 90
  wait_sql 30 "SELECT count(*) > 0 FROM checkpoints WHERE run_id = $run"
  wait_sql 180 "SELECT state = 'QUEUED' FROM runs WHERE id = $run"  # a drain, or the lease's expiry
  start_worker w-crash 1 $(slow_env)
  wait_sql 120 "SELECT count(*) = 1 FROM attempts WHERE run_id = $run AND attempt = 2
                AND outcome = 'running'"
  if ((V >= 4)); then
    wait_sql 120 "SELECT count(*) > 0 FROM metrics WHERE run_id = $run AND attempt = 2"
  fi
  # The coordinator is stopped while the worker is frozen, so that the attempt is still open
  # in the database whatever the (short) lease TTL; then the worker and its trainer die.
  log kill -STOP "$WORKER_PID"
  log kill -TERM "$COORD_PID"
  stop_pid "$COORD_PID"
  COORD_PID=
  log pkill -KILL -s "$WORKER_PID"
  wait "$WORKER_PID" 2>/dev/null || true
  UNFINISHED_RUN=$run
}

# --- the fixture -------------------------------------------------------------------------------

fail() {
  echo "make_fixture: $*" >&2
  exit 1
}

# Writes $OUT from what the scenario left in $GEN.
collect() {
  cd "$GEN"
  # One file: the WAL checkpointed into the database; the header keeps the WAL mode the old
  # coordinator set, and the last connection's close removes the emptied -wal file.
  sqlite3 xmod.db 'PRAGMA wal_checkpoint(TRUNCATE);' >/dev/null
  [ ! -e xmod.db-wal ] || fail "xmod.db-wal is left"
  [ "$(sql 'PRAGMA user_version')" = "$V" ] || fail "schema version $(sql 'PRAGMA user_version')"
  [ "$(sql "SELECT count(*) FROM runs WHERE state IN ('QUEUED', 'RUNNING')")" = 1 ] ||
    fail "not exactly one unfinished run"
  rm -rf "$OUT"
  mkdir -p "$OUT"
  local path
  for path in $(sql "SELECT path FROM checkpoints WHERE run_id = $UNFINISHED_RUN"); do
    [[ "$path" == checkpoints/* ]] || fail "checkpoint path $path: not under checkpoints/"
    [ -f "$path" ] || fail "checkpoint $path: no such file"
    mkdir -p "$OUT/$(dirname "$path")"
    cp "$path" "$OUT/$path"
  done
  gzip -9 -n -c xmod.db >"$OUT/xmod.db.gz"
  write_manifest >"$OUT/MANIFEST"
}

write_manifest() {
  local table
  echo "# Upgrade fixture: a database of schema version $V, written by that version's own code"
  echo "# (tests/upgrade/README.md). Made by tests/upgrade/make_fixture.sh $V ${COMMIT:0:7}."
  echo
  echo "commit: $COMMIT"
  echo "commit date and subject: $(git -C "$REPO" log -1 --format='%cs %s' "$COMMIT" | cut -c1-160)"
  echo "schema version: $(sql 'PRAGMA user_version')"
  echo "made on: $(date -u +%F), $(c++ --version | head -1), sqlite3 $(sqlite3 --version | cut -d' ' -f1)"
  echo "built: cmake -G Ninja $(grep -E '^(CMAKE_BUILD_TYPE|CMAKE_CXX_FLAGS|XMOD_[A-Z_]+):' \
    "$OLD_TREE/build/CMakeCache.txt" | grep -v -e _DIR: -e FUZZ | sed 's/^/-D/; s/:[A-Z]*=\(.*\)/="\1"/' |
    tr '\n' ' ')"
  echo "       ninja xmod-coordinator xmodctl xmod-worker fake_train"
  if ((${#PATCHES[@]})); then
    printf 'changed in the old tree before building: %s\n' "${PATCHES[@]}"
  else
    echo "changed in the old tree before building: nothing"
  fi
  echo
  echo "files:"
  echo "  xmod.db.gz: the database, gzip -9 -n; unpacked $(stat -c %s xmod.db) bytes," \
    "sha256 $(sha256sum xmod.db | cut -d' ' -f1)"
  for path in $(cd "$OUT" && find checkpoints -type f | sort); do
    echo "  $path: $(stat -c %s "$path") bytes, sha256 $(sha256sum "$path" | cut -d' ' -f1)"
  done
  echo
  echo "unfinished run: $UNFINISHED_RUN" \
    "($(sql "SELECT 'sweep ' || sweep_id || ', ' || state || ', ' || attempts || ' attempts'
              FROM runs WHERE id = $UNFINISHED_RUN"))"
  sql -separator ' ' "SELECT '  attempt', attempt, outcome, 'resumed_from_step', resumed_from_step
                      FROM attempts WHERE run_id = $UNFINISHED_RUN ORDER BY attempt"
  sql -separator ' ' "SELECT '  checkpoint', attempt, step, path, sha256 FROM checkpoints
                      WHERE run_id = $UNFINISHED_RUN ORDER BY step"
  echo
  echo "rows per table (name, count):"
  for table in $(sql "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"); do
    echo "rows: $table $(sql "SELECT count(*) FROM \"$table\"")"
  done
  echo "runs by sweep and state:"
  sql -separator ' ' "SELECT '  sweep', s.id, s.name, r.state, count(*) FROM runs r
                      JOIN sweeps s ON s.id = r.sweep_id GROUP BY s.id, r.state ORDER BY s.id"
  echo
  echo "commands, in $GEN (secrets/ holds the credentials file and token files the" \
    "script made; the coordinator's and workers' logs went to logs/):"
  sed 's/^/  /' commands.log
  echo
  echo "files the commands read:"
  for path in *.textpb sharing.txtpb law.json; do
    [ -f "$path" ] || continue
    echo "--- $path"
    cat "$path"
  done
}

build_old
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0
trap cleanup EXIT
scenario
collect
echo "make_fixture: wrote $OUT ($(du -sh "$OUT" | cut -f1))"
