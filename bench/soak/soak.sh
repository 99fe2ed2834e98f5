#!/usr/bin/env bash
# The soak: a coordinator under DURATION seconds (default 1800) of churn on loopback, with
# what it holds sampled every SAMPLE_S seconds (default 30) — its resident memory, open file
# descriptors and threads, and the database's size (the .db and its -wal) — to show that
# nothing grows but the data. The churn, in a loop until the time is up:
#   - small sweeps submitted (worker/fake_train runs them: 20 steps of 20 ms) and every other
#     one cancelled at once;
#   - one of the two workers SIGKILLed and started again (every 60 s);
#   - a sweep of 10,000 runs (submitted and cancelled at the start, so that the workers keep
#     to the churn) listed whole and paged through 1,000 at a time;
#   - dashboard sessions signed in and out (one every 5 s: the coordinator allows 20 sign-ins
#     a minute per credential), and the sweep's event stream opened and dropped;
#   - WatchSweep streams opened (xmodctl sweep watch) and dropped after a second.
# It prints one CSV line per sample (elapsed_s, rss_kib, fds, threads, db_kib, sweeps, runs,
# events, metric_rows) and then the first and last samples side by side with their growth.
# The data (runs, events, metrics) grows by design; growth of rss, fds or threads at a flat
# rate through the second half is what it looks for. All traffic stays on 127.0.0.1.
#
# Usage: bench/soak/soak.sh [BUILD_DIR]     (default build/release; needs xmod-coordinator,
#        xmod-worker, xmodctl and tests/fake_train)   DURATION=1800 SAMPLE_S=30 KEEP_TMP=1
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build/release}" && pwd)
for bin in bin/xmod-coordinator bin/xmod-worker bin/xmodctl tests/fake_train; do
  [[ -x "$build/$bin" ]] || { echo "no $build/$bin: build it first" >&2; exit 2; }
done
DURATION=${DURATION:-1800}
SAMPLE_S=${SAMPLE_S:-30}
export XMOD_BIN_DIR=$build/bin
source "$here/../../tests/lib/cluster.sh"

export XMOD_TRAIN_BIN=$build/tests/fake_train FAKE_TRAIN_MODE=ok FAKE_TRAIN_STEPS=20 \
  FAKE_TRAIN_STEP_MS=20
use_credentials w1 w2
start_coordinator --nocheck_data_paths --heartbeat_interval_ms=500 --lease_ttl_ms=5000
COORD_PID=${COORD_PIDS[-1]}
declare -A WORKER_PID
start_soak_worker() {
  start_worker "$1" --train_bin="$XMOD_TRAIN_BIN"
  WORKER_PID[$1]=${PIDS[-1]}
}
start_soak_worker w1
start_soak_worker w2
xmodctl() { "$XMOD_BIN_DIR/xmodctl" --timeout 60 "$@"; }

# A sweep of SEEDS replicates of one tiny Dense run at PRIORITY: grids of at most 1,000 seeds
# (a grid's limit).
sweep_spec() {  # NAME SEEDS PRIORITY
  local first last
  echo "name: \"$1\" priority: $3"
  for ((first = 1; first <= $2; first += 1000)); do
    last=$((first + 999 < $2 ? first + 999 : $2))
    echo "grids { label: \"g$first\" archs: DENSE backbones: \"tiny-test\" seq_lens: 64" \
      "seeds: [$(seq -s, "$first" "$last")] }"
  done
  cat <<SPEC
training { flop_budget: 1e12 seq_len: 64 batch_tokens: 512 }
data { train_glob: "$TEST_TMP/none_*.bin" val_glob: "$TEST_TMP/none_*.bin" }
SPEC
}
sweep_spec big 10000 0 >"$TEST_TMP/big.textpb"
BIG=$(xmodctl -o json sweep submit "$TEST_TMP/big.textpb" | json_field /dev/stdin sweep_id)
xmodctl sweep cancel "$BIG" >/dev/null

DB=$TEST_TMP/xmod.db
sample() {  # one CSV line
  local rss fds threads db counts
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$COORD_PID/status")
  threads=$(awk '/^Threads/ {print $2}' "/proc/$COORD_PID/status")
  fds=$(ls "/proc/$COORD_PID/fd" | wc -l)
  db=$(($(stat -c %s "$DB") / 1024 + $( (stat -c %s "$DB-wal" 2>/dev/null || echo 0)) / 1024))
  counts=$(sqlite3 -readonly "$DB" "SELECT (SELECT COUNT(*) FROM sweeps) || ',' ||
    (SELECT COUNT(*) FROM runs) || ',' || (SELECT COUNT(*) FROM events) || ',' ||
    (SELECT COUNT(*) FROM metrics)")
  echo "$((SECONDS - start)),$rss,$fds,$threads,$db,$counts"
}

churn_once() {  # one round of every kind of churn; $1 is the round
  local round=$1 id cookie token
  sweep_spec "churn-$round" 4 0 >"$TEST_TMP/churn.textpb"
  id=$(xmodctl -o json sweep submit "$TEST_TMP/churn.textpb" | json_field /dev/stdin sweep_id)
  if ((round % 2 == 0)); then xmodctl sweep cancel "$id" >/dev/null; fi
  token=$(xmodctl -o json runs list --sweep "$BIG" --page_size 1000 |
    json_field /dev/stdin next_page_token)
  for _ in 1 2 3; do
    [[ -n "$token" ]] || break
    token=$(xmodctl -o json runs list --sweep "$BIG" --page_size 1000 --page_token "$token" |
      json_field /dev/stdin next_page_token)
  done
  xmodctl -o csv runs list --sweep "$BIG" >/dev/null
  timeout 1 "$XMOD_BIN_DIR/xmodctl" sweep watch "$id" --no_redraw >/dev/null 2>&1 || true
  ((SECONDS >= next_login)) || return 0
  next_login=$((SECONDS + 5))  # the coordinator allows 20 sign-ins a minute per credential
  cookie=$TEST_TMP/cookies
  curl -sf -c "$cookie" -H 'Content-Type: text/plain' --data-binary @"$XMOD_TOKEN_FILE" \
    "http://127.0.0.1:$COORD_HTTP/api/login" >/dev/null
  curl -s -b "$cookie" --max-time 1 "http://127.0.0.1:$COORD_HTTP/api/sweeps/$id/events" \
    >/dev/null || true
  curl -sf -b "$cookie" --data "" "http://127.0.0.1:$COORD_HTTP/api/logout" >/dev/null
}

start=$SECONDS
next_sample=$start
next_kill=$((start + 60))
next_login=$start
round=0
echo "elapsed_s,rss_kib,fds,threads,db_kib,sweeps,runs,events,metric_rows" | tee "$TEST_TMP/soak.csv"
while ((SECONDS - start < DURATION)); do
  if ((SECONDS >= next_sample)); then
    sample | tee -a "$TEST_TMP/soak.csv"
    next_sample=$((next_sample + SAMPLE_S))
  fi
  if ((SECONDS >= next_kill)); then
    victim=w$((round % 2 + 1))
    kill -KILL "${WORKER_PID[$victim]}" 2>/dev/null || true
    wait "${WORKER_PID[$victim]}" 2>/dev/null || true
    start_soak_worker "$victim"
    next_kill=$((next_kill + 60))
  fi
  churn_once "$round"
  round=$((round + 1))
done
sample | tee -a "$TEST_TMP/soak.csv"
/usr/bin/python3 - "$TEST_TMP/soak.csv" "$round" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
first, last = rows[0], rows[-1]
half = rows[len(rows) // 2]
print(f"\nsoak: {last['elapsed_s']} s, {sys.argv[2]} rounds of churn")
print(f"{'':12}{'start':>12}{'middle':>12}{'end':>12}{'growth':>12}{'2nd half':>12}")
for key in ["rss_kib", "fds", "threads", "db_kib", "sweeps", "runs", "events", "metric_rows"]:
    a, m, b = int(first[key]), int(half[key]), int(last[key])
    print(f"{key:12}{a:12}{m:12}{b:12}{b - a:+12}{b - m:+12}")
PY
