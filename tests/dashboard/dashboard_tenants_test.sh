#!/usr/bin/env bash
# The dashboard's changes with a lab's users (docs/security.md, "What each scope may do"): a
# real coordinator with credentials (users tester and other, admin operator, reader viewer)
# serving dashboard/static, and no worker, so the sweep tester submits stays queued. Headless
# Chromium (dashboard_tenants.mjs) signs in as each and checks that other's Cancel is refused
# naming tester and changes nothing, that tester can cancel and resume, that the reader gets
# no buttons and that the admin can cancel the sweep, each change in the History table with
# who made it. The database then holds exactly those changes (sqlite3, read-only).
# $TEST_TMP/dashboard_tenants.png is the last view (KEEP_TMP=1 keeps it).
SRC=${XMOD_SOURCE_DIR:?XMOD_SOURCE_DIR must point at the source tree}
PLAYWRIGHT=$SRC/.cache/npm/node_modules/playwright-core
missing=()
command -v node >/dev/null || missing+=("node")
[ -x /usr/bin/chromium ] || missing+=("/usr/bin/chromium")
[ -f "$PLAYWRIGHT/index.mjs" ] || missing+=("$PLAYWRIGHT")
command -v sqlite3 >/dev/null || missing+=("sqlite3")
if ((${#missing[@]})); then
  echo "FAIL: missing ${missing[*]}; run scripts/setup.sh (as root) to install them" >&2
  exit 1
fi

source "$SRC/tests/lib/cluster.sh"
use_credentials
start_coordinator --dashboard_dir="$SRC/dashboard/static"
cat >"$TEST_TMP/sweep.textpb" <<SPEC
name: "tenants"
grids { archs: [DENSE, XMOD] backbones: "tiny-test" seq_lens: 64 ks: [2, 4] as: 1 }
training { flop_budget: 3e9 seq_len: 64 batch_tokens: 128 }
data { train_glob: "$TEST_TMP/none_*.bin" val_glob: "$TEST_TMP/none_*.bin" }
SPEC
"$XMOD_BIN_DIR/xmodctl" -o json sweep submit "$TEST_TMP/sweep.textpb" >"$TEST_TMP/submit.json"
SWEEP=$(json_field "$TEST_TMP/submit.json" sweep_id)

node "$SRC/tests/dashboard/dashboard_tenants.mjs" "$PLAYWRIGHT" "http://127.0.0.1:$COORD_HTTP" \
  "$SWEEP" "$TEST_TMP" "$TEST_TMP/dashboard_tenants.png"

# Exactly the changes the browser made are on record, each with its actor.
changes=$(sqlite3 -readonly "$TEST_TMP/xmod.db" \
  "SELECT kind || ':' || actor FROM events WHERE actor IS NOT NULL ORDER BY id" | tr '\n' ' ')
expected="sweep_submitted:tester run_cancelled:tester run_resumed:tester sweep_cancelled:operator "
if [[ "$changes" != "$expected" ]]; then
  echo "FAIL: events on record: '$changes', expected '$expected'" >&2
  exit 1
fi
echo "PASS: events on record: $changes"
