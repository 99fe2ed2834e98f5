#!/usr/bin/env bash
# End-to-end test of the web dashboard with a real browser. A real coordinator (serving
# dashboard/static) and two real workers on loopback train a 10-run sweep (Dense and X-MoD
# K = 2..16 on tiny-test at L = 64 and 128, each evaluated zero-shot on 40 gcide examples at
# the end) on byte-level shards that xmod-data makes from dict-gcide. While a run is RUNNING, the coordinator's Prometheus endpoint must export its
# per-run series; once the sweep ends they must be gone, and the coordinator must have
# fitted the law over the eight sparse runs; a study over the sweep (xmodctl study create)
# is then fitted too. The coordinator has credentials (workers and
# xmodctl use token files); headless Chromium (playwright-core) signs in through the login form
# with a read credential, checks the page (dashboard_e2e.mjs) and saves
# $TEST_TMP/dashboard.png (KEEP_TMP=1 keeps it). Then every bundled example spec is submitted
# (and all but one cancelled at once) and the browser opens every sweep and study, failing
# on any console error, page error, failed /api/ request or error banner. Last, a sweep of
# 10,000 runs (1,000 seeds x 10 K values, the spec limit) is submitted and left queued, and
# dashboard_scale.mjs pages, sorts, filters, groups and compares it, then leaves the tab
# open for XMOD_DASHBOARD_IDLE_S seconds (default 60) and prints the first-render time and
# the browser's idle CPU.
# Needs node, /usr/bin/chromium and playwright-core: scripts/setup.sh installs them.
SRC=${XMOD_SOURCE_DIR:?XMOD_SOURCE_DIR must point at the source tree}
PLAYWRIGHT=$SRC/.cache/npm/node_modules/playwright-core
missing=()
command -v node >/dev/null || missing+=("node")
[ -x /usr/bin/chromium ] || missing+=("/usr/bin/chromium")
[ -f "$PLAYWRIGHT/index.mjs" ] || missing+=("$PLAYWRIGHT")
if ((${#missing[@]})); then
  echo "FAIL: missing ${missing[*]}; run scripts/setup.sh (as root) to install them" >&2
  exit 1
fi
[ -f /usr/share/dictd/gcide.dict.dz ] || {
  echo "FAIL: /usr/share/dictd/gcide.dict.dz missing; run scripts/setup.sh" >&2
  exit 1
}

source "$SRC/tests/lib/cluster.sh"
step_start=$SECONDS
step() {
  echo "[$((SECONDS - step_start)) s] $*"
}

# Byte-level shards (vocabulary 256 = tiny-test's) from the first MB of dict-gcide.
corpus=$TEST_TMP/corpus
mkdir -p "$corpus"
"$XMOD_BIN_DIR/xmod-data" gcide --out "$corpus/gcide.txt" >/dev/null
head -c 1000000 "$corpus/gcide.txt" >"$corpus/text.txt"
"$XMOD_BIN_DIR/xmod-data" train-bpe --text "$corpus/text.txt" --vocab 256 \
  --out "$corpus/bytes.txt" >/dev/null
"$XMOD_BIN_DIR/xmod-data" encode --tokenizer "$corpus/bytes.txt" --text "$corpus/text.txt" \
  --out_prefix "$corpus/gcide" --val_fraction 0.1 >/dev/null
"$XMOD_BIN_DIR/xmod-data" gcide-task --text "$corpus/text.txt" --out "$corpus/gcide_task.jsonl" \
  --val_fraction 0.1 --max_examples 40 >/dev/null
step "corpus ready"

# With credentials: the browser signs in through the login form with the read credential.
use_credentials w1 w2
printf 'Authorization: Bearer %s\n' "$(<"$READ_TOKEN_FILE")" >"$TEST_TMP/read_auth_header"
start_coordinator --dashboard_dir="$SRC/dashboard/static"
start_worker w1
WORKER_PIDS=("${PIDS[-1]}")
start_worker w2
WORKER_PIDS+=("${PIDS[-1]}")

# Dense and X-MoD (K = 2, 4, 8, 16; A = 1) on tiny-test at L = 64 and 128: ten runs, eight
# sparse ones, the fewest the law fit's first stage accepts (fitter/two_stage.cc). tiny-test
# costs ~6e5 training FLOPs per token, so 3e9 is ~5k tokens, ~40 steps of 128 tokens.
cat >"$TEST_TMP/sweep.textpb" <<SPEC
name: "dash-e2e"
description: "dashboard end-to-end test"
grids { label: "dense" archs: DENSE backbones: "tiny-test" seq_lens: [64, 128] }
grids { label: "xmod" archs: XMOD backbones: "tiny-test" seq_lens: [64, 128] ks: [2, 4, 8, 16]
        as: 1 }
training { flop_budget: 3e9 seq_len: 64 batch_tokens: 128 eval_marks: 4 eval_tokens: 2048
           seed: 1 eval_tasks { task: "gcide" data: "$corpus/gcide_task.jsonl" }
           eval_tokenizer: "$corpus/bytes.txt" }
data { train_glob: "$corpus/gcide_train_*.bin" val_glob: "$corpus/gcide_val_*.bin" }
fit { enabled: true }
max_attempts: 2
SPEC
"$XMOD_BIN_DIR/xmodctl" -o json sweep submit "$TEST_TMP/sweep.textpb" >"$TEST_TMP/submit.json"
SWEEP=$(json_field "$TEST_TMP/submit.json" sweep_id)
RUNS=$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["runs"]))' \
  "$TEST_TMP/submit.json")
step "submitted sweep $SWEEP with $RUNS runs"

# Per-active-run Prometheus series, seen while a run is RUNNING.
metrics_url="http://127.0.0.1:$COORD_METRICS/metrics"
deadline=$((SECONDS + 120))
until curl -sf "$metrics_url" >"$TEST_TMP/metrics.txt" &&
  grep -Eq '^xmod_run_flops_done\{run="[^"]+"\} [1-9]' "$TEST_TMP/metrics.txt" &&
  grep -Eq '^xmod_run_train_loss\{run="[^"]+"\} [0-9.]*[1-9]' "$TEST_TMP/metrics.txt"; do
  if ((SECONDS > deadline)); then
    echo "FAIL: no xmod_run_flops_done / xmod_run_train_loss series while the sweep ran" >&2
    grep '^xmod_run' "$TEST_TMP/metrics.txt" >&2 || true
    exit 1
  fi
  sleep 0.2
done
active=$(sed -n 's/^xmod_run_flops_done{run="\([^"]*\)"}.*/\1/p' "$TEST_TMP/metrics.txt" | head -1)
grep -q "\"name\": \"$active\"" "$TEST_TMP/submit.json" || {
  echo "FAIL: per-run series label '$active' is not a run of sweep $SWEEP" >&2
  exit 1
}
step "per-run series exported for RUNNING run $active"

timeout 300 "$XMOD_BIN_DIR/xmodctl" sweep watch "$SWEEP" >"$TEST_TMP/watch.txt"
tail -1 "$TEST_TMP/watch.txt"
step "sweep ended"
# No run is left for the workers: they drain (leasing nothing more) while the fits land, so
# that none takes a run of the example sweeps submitted below.
for pid in "${WORKER_PIDS[@]}"; do kill "$pid"; done
curl -sf "$metrics_url" >"$TEST_TMP/metrics.txt"
if grep -q '^xmod_run_flops_done{' "$TEST_TMP/metrics.txt"; then
  echo "FAIL: per-run series outlived their runs:" >&2
  grep '^xmod_run_' "$TEST_TMP/metrics.txt" >&2
  exit 1
fi

# The coordinator refits the law in the background as runs succeed; the last fit (all eight
# sparse runs) lands shortly after the sweep ends.
fit_url="http://127.0.0.1:$COORD_HTTP/api/sweeps/$SWEEP/fit"
deadline=$((SECONDS + 60))
until [ "$(curl -s -H @"$TEST_TMP/read_auth_header" -o "$TEST_TMP/fit.json" -w '%{http_code}' \
  "$fit_url")" = 200 ] &&
  /usr/bin/python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["n_obs"] != 8)' \
    "$TEST_TMP/fit.json"; do
  if ((SECONDS > deadline)); then
    echo "FAIL: no fit over the 8 sparse runs within 60 s of the sweep's end:" >&2
    cat "$TEST_TMP/fit.json" >&2
    exit 1
  fi
  sleep 0.5
done
step "fit stored: $(head -c 160 "$TEST_TMP/fit.json")"

# A study over the finished sweep (as the K x L sweep): fitted at the coordinator's next poll.
"$XMOD_BIN_DIR/xmodctl" study create dash-study --member "kxl=$SWEEP" >/dev/null
study_fit_url="http://127.0.0.1:$COORD_HTTP/api/studies/dash-study/fit"
deadline=$((SECONDS + 60))
until [ "$(curl -s -H @"$TEST_TMP/read_auth_header" -o "$TEST_TMP/study_fit.json" \
  -w '%{http_code}' "$study_fit_url")" = 200 ]; do
  if ((SECONDS > deadline)); then
    echo "FAIL: no fit of study dash-study within 60 s:" >&2
    cat "$TEST_TMP/study_fit.json" >&2
    exit 1
  fi
  sleep 0.5
done
step "study fit stored: $(head -c 160 "$TEST_TMP/study_fit.json")"

# Every bundled example spec as a stored sweep shape the dashboard must render: most are far
# too long to run (the paper's), so the workers are stopped (above) and each sweep is
# submitted (data globs rewritten to this corpus) and cancelled at once: cancelled runs, many
# runs (cpu_b4's 68, b4_kxl's 67), no fit block, held-out runs (b4_kxl, b4_nact), MoE
# (b3_pilot, table1_main), the mechanism controls and ablations. examples/tiny.textpb stays
# queued (no worker takes it). examples/paper/b4_study.textpb is a study over three of them.
wait_pids 60 "${WORKER_PIDS[@]}"
SWEEPS=1
STUDY_SPECS=()
for spec in "$SRC"/examples/*.textpb "$SRC"/examples/paper/*.textpb; do
  name=$(basename "$spec" .textpb)
  if grep -q '^members' "$spec"; then
    STUDY_SPECS+=("$spec")
    continue
  fi
  sed -e "s#train_glob: \"[^\"]*\"#train_glob: \"$corpus/gcide_train_*.bin\"#" \
    -e "s#val_glob: \"[^\"]*\"#val_glob: \"$corpus/gcide_val_*.bin\"#" \
    "$spec" >"$TEST_TMP/example-$name.textpb"
  grep -q "$corpus/gcide_train_" "$TEST_TMP/example-$name.textpb" || {
    echo "FAIL: no data.train_glob rewritten in $spec" >&2
    exit 1
  }
  "$XMOD_BIN_DIR/xmodctl" -o json sweep submit "$TEST_TMP/example-$name.textpb" \
    >"$TEST_TMP/example-$name.json"
  id=$(json_field "$TEST_TMP/example-$name.json" sweep_id)
  [ "$name" = tiny ] || "$XMOD_BIN_DIR/xmodctl" sweep cancel "$id" >/dev/null
  SWEEPS=$((SWEEPS + 1))
done
for spec in "${STUDY_SPECS[@]}"; do
  "$XMOD_BIN_DIR/xmodctl" study create -f "$spec" >/dev/null
done
step "submitted $((SWEEPS - 1)) example sweeps (all but tiny cancelled), ${#STUDY_SPECS[@]} study"

node "$SRC/tests/dashboard/dashboard_e2e.mjs" "$PLAYWRIGHT" "http://127.0.0.1:$COORD_HTTP" \
  "$SWEEP" "$RUNS" "$TEST_TMP/dashboard.png" "$READ_TOKEN_FILE" dash-study "$SWEEPS"
step "browser checks passed; screenshot $TEST_TMP/dashboard.png"

# The page at 10,000 runs: submitted, never trained (the workers are gone).
seeds=$(seq -s ', ' 1 1000)
cat >"$TEST_TMP/scale.textpb" <<SPEC
name: "scale-10k"
description: "10,000 runs: 1,000 seeds x 10 K values"
grids { label: "seeds" archs: XMOD backbones: "tiny-test" seq_lens: 64
        ks: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] as: 1 seeds: [$seeds] }
training { flop_budget: 3e9 seq_len: 64 batch_tokens: 128 }
data { train_glob: "$corpus/gcide_train_*.bin" val_glob: "$corpus/gcide_val_*.bin" }
SPEC
"$XMOD_BIN_DIR/xmodctl" -o json sweep submit "$TEST_TMP/scale.textpb" >"$TEST_TMP/scale.json"
SCALE_SWEEP=$(json_field "$TEST_TMP/scale.json" sweep_id)
SCALE_RUNS=$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["runs"]))' \
  "$TEST_TMP/scale.json")
[ "$SCALE_RUNS" = 10000 ] || { echo "FAIL: the scale sweep has $SCALE_RUNS runs" >&2; exit 1; }
step "submitted sweep $SCALE_SWEEP with $SCALE_RUNS runs"
node "$SRC/tests/dashboard/dashboard_scale.mjs" "$PLAYWRIGHT" "http://127.0.0.1:$COORD_HTTP" \
  "$SCALE_SWEEP" "$SCALE_RUNS" "$READ_TOKEN_FILE" "${XMOD_DASHBOARD_IDLE_S:-60}" \
  "$(getconf CLK_TCK)"
step "browser checks at $SCALE_RUNS runs passed"
