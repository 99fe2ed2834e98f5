#!/usr/bin/env bash
# Out of memory is an outcome, not a crash (docs/fault-tolerance.md, "Out of memory"): the
# real coordinator, a worker and the real xmod-train with its test fault
# XMOD_TEST_OOM_ABOVE_MICRO_BATCH_TOKENS=64 (a micro-batch holding more tokens' activations
# than that runs out of memory; activation checkpointing counts as holding half). A run of
# 256 tokens a step runs out at its whole share (256 tokens), again with activation
# checkpointing (128 held), and succeeds on its third attempt with activation checkpointing
# and micro-batches of 128 tokens (64 held). Each attempt says what it ran with and why it
# ended, in the database and in `xmodctl run show`; max_attempts is 2, as smaller plans are
# not counted against it. Every wait has a deadline. Needs XMOD_BIN_DIR (xmod-coordinator,
# xmod-worker, xmod-train, xmodctl).
source "$(dirname "$0")/../lib/cluster.sh"
STARTED=$SECONDS

fail() {
  echo "oom_retry_test: FAIL: $*" >&2
  for log in "$TEST_TMP"/*.log "$TEST_TMP"/w1/run-*/train.log; do
    [ -f "$log" ] || continue
    echo "--- $log (tail)" >&2
    tail -n 15 "$log" >&2
  done
  exit 1
}

start_coordinator --lease_ttl_ms=5000 --heartbeat_interval_ms=500
start_worker w1 --train_env=XMOD_TEST_OOM_ABOVE_MICRO_BATCH_TOKENS=64
write_learnable_shards "$TEST_TMP"
cat >"$TEST_TMP/oom.textpb" <<SPEC
name: "oom"
max_attempts: 2
grids { label: "g" archs: DENSE backbones: "tiny-test" seq_lens: 16 }
training {
  flop_budget: 2e9 seq_len: 16 batch_tokens: 256 lr: 0.02 adamw_lr: 0.01 eval_marks: 1
  eval_tokens: 64 threads: 1 log_every_steps: 1 precision: "fp32"
}
data { train_glob: "$TEST_TMP/train_*.bin" val_glob: "$TEST_TMP/val_*.bin" }
SPEC
"$XMOD_BIN_DIR/xmodctl" sweep submit "$TEST_TMP/oom.textpb" >/dev/null || fail "cannot submit"
RUN=$(q "SELECT id FROM runs")
wait_query "SELECT state FROM runs WHERE id = $RUN" SUCCEEDED 180

plans=$(q "SELECT attempt || ' ' || outcome || ' ' || IFNULL(exit_code, '') || ' [' ||
                  IFNULL(memory_plan, '') || ']' FROM attempts WHERE run_id = $RUN ORDER BY attempt")
want="1 failed 5 []
2 failed 5 [activation checkpointing (after 1 out-of-memory failure)]
3 succeeded 0 [activation checkpointing, micro-batches of 128 tokens (after 2 out-of-memory failures)]"
[ "$plans" = "$want" ] || fail "attempts:
$plans
want:
$want"
for attempt in 1 2; do
  error=$(q "SELECT error FROM attempts WHERE run_id = $RUN AND attempt = $attempt")
  checkpointing=$([ "$attempt" = 1 ] && echo off || echo on)
  grep -q "out of memory at a micro-batch of 256 tokens per rank, activation checkpointing $checkpointing" \
    <<<"$error" || fail "attempt $attempt's error does not say at which size: $error"
done
"$XMOD_BIN_DIR/xmodctl" run show "$RUN" >"$TEST_TMP/show.txt" || fail "xmodctl run show"
grep -q "micro-batches of 128 tokens" "$TEST_TMP/show.txt" ||
  fail "run show lacks the memory plan: $(cat "$TEST_TMP/show.txt")"
grep -q "attempt 3 on w1.*with activation checkpointing, micro-batches of 128 tokens" \
  <<<"$(q "SELECT text FROM events WHERE run_id = $RUN AND kind = 'attempt_started'")" ||
  fail "the attempt_started event does not name the plan"
echo "oom_retry_test: $plans" | head -3
echo "oom_retry_test: PASS in $((SECONDS - STARTED)) s"
