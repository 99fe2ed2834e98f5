#!/usr/bin/env bash
# End-to-end test of the web dashboard with a real browser. A real coordinator (serving
# dashboard/static) and two real workers on loopback train a 10-run sweep (Dense and X-MoD
# K = 2..16 on tiny-test at L = 64 and 128) on byte-level shards that xmod-data makes from
# dict-gcide. While a run is RUNNING, the coordinator's Prometheus endpoint must export its
# per-run series; once the sweep ends they must be gone, and the coordinator must have
# fitted the law over the eight sparse runs; a study over the sweep (xmodctl study create)
# is then fitted too. The coordinator has credentials (workers and
# xmodctl use token files); headless Chromium (playwright-core) signs in through the login form
# with a read credential, checks the page (dashboard_e2e.mjs) and saves
# $TEST_TMP/dashboard.png (KEEP_TMP=1 keeps it).
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
step "corpus ready"

# With credentials: the browser signs in through the login form with the read credential.
use_credentials w1 w2
printf 'Authorization: Bearer %s\n' "$(<"$READ_TOKEN_FILE")" >"$TEST_TMP/read_auth_header"
start_coordinator --dashboard_dir="$SRC/dashboard/static"
start_worker w1
start_worker w2

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
           seed: 1 }
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

node "$SRC/tests/dashboard/dashboard_e2e.mjs" "$PLAYWRIGHT" "http://127.0.0.1:$COORD_HTTP" \
  "$SWEEP" "$RUNS" "$TEST_TMP/dashboard.png" "$READ_TOKEN_FILE" dash-study
step "browser checks passed; screenshot $TEST_TMP/dashboard.png"
