#!/usr/bin/env bash
# The xmod demo (README quick start, called by scripts/demo.sh): on one machine and CPU only,
#   1. builds the demo corpus if missing (dict-gcide, small-vocabulary BPE, llm.c shards),
#   2. starts a local cluster (deploy/local/cluster.sh: a coordinator, two 1-core workers),
#   3. submits examples/demo.textpb (Dense, X-MoD K in {2,4} x A in {1,2}, MoD on cpu-d128),
#   4. follows it live with `xmodctl sweep watch`,
#   5. prints the results table read from the database (run_summary view),
# and stops the cluster on exit, whatever happened.
#
# Usage: deploy/local/demo.sh BUILD_DIR [SPEC]
# Env:   XMOD_DEMO_DIR (state, default ./var/demo), XMOD_DEMO_WORKERS (default 2).
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 BUILD_DIR [SPEC (default examples/demo.textpb)]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=$(cd "$1" && pwd)
spec=${2:-$root/examples/demo.textpb}
state_dir=${XMOD_DEMO_DIR:-./var/demo}
mkdir -p "$state_dir"
state_dir=$(cd "$state_dir" && pwd)
corpus=$state_dir/corpus
xmodctl=$build_dir/bin/xmodctl
[[ -x $xmodctl ]] || { echo "demo.sh: $xmodctl not found; build first" >&2; exit 1; }

start=$(date +%s)
echo "== demo corpus ($corpus)"
"$root/data/make_demo_corpus.sh" "$corpus" "$build_dir/bin"

echo "== local cluster"
cluster() { "$root/deploy/local/cluster.sh" "$@" --state "$state_dir"; }
# A previous demo that was killed may have left its processes behind.
cluster stop
trap 'echo "== stopping the cluster"; cluster stop' EXIT
cluster start "$build_dir" --workers "${XMOD_DEMO_WORKERS:-2}"
# shellcheck disable=SC1091
source "$state_dir/env"

# The example spec points at var/demo/corpus; point it at this corpus, wherever it is.
submitted_spec=$state_dir/$(basename "$spec")
sed "s#var/demo/corpus#$corpus#g" "$spec" >"$submitted_spec"

echo "== submitting $spec"
submit_out=$("$xmodctl" sweep submit "$submitted_spec")
echo "$submit_out"
sweep_id=$(sed -n 's/^Submitted sweep \([0-9]*\) .*/\1/p' <<<"$submit_out")
[[ -n $sweep_id ]] || { echo "demo.sh: could not read the sweep id" >&2; exit 1; }

echo "== watching sweep $sweep_id (dashboard: $XMOD_DASHBOARD)"
watch_status=0
"$xmodctl" sweep watch "$sweep_id" || watch_status=$?

echo "== results of sweep $sweep_id (from the database)"
# φ/φ_D: forward FLOPs per token relative to the Dense runs of the same backbone and L (every
# seed of a dense reference has the same FLOPs, so one row per run whatever the seeds);
# GFLOP/s: training FLOPs per second achieved (3 x forward FLOPs per token x tokens/s).
"$xmodctl" query "
SELECT s.name,
       lower(s.arch) AS arch,
       CASE WHEN s.arch IN ('DENSE', 'MOE') THEN NULL ELSE s.k END AS K,
       CASE WHEN s.arch IN ('XMOD', 'ROUTED_FFN', 'SELECTED_Q_FULL_KV') THEN s.a END AS A,
       s.l AS L,
       printf('%.2fM', s.total_params / 1e6) AS params,
       round(s.forward_flops_per_token / (
         SELECT avg(d.forward_flops_per_token) FROM run_summary d
         WHERE d.sweep_id = s.sweep_id AND d.arch = 'DENSE' AND d.backbone = s.backbone
           AND d.l = s.l), 4) AS \"φ/φ_D\",
       round(s.final_val_loss, 4) AS final_val_loss,
       CASE WHEN r.finished_ms > 0 THEN round((r.finished_ms - r.started_ms) / 1000.0, 1) END
         AS wall_s,
       CAST(round(s.tokens_per_second) AS INTEGER) AS tokens_per_s,
       printf('%.2f', 3 * s.forward_flops_per_token * s.tokens_per_second / 1e9) AS gflop_per_s,
       lower(s.state) AS state
FROM run_summary s
JOIN runs r ON r.id = s.run_id
WHERE s.sweep_id = $sweep_id
ORDER BY s.run_id"

echo "== demo finished in $(( $(date +%s) - start )) s (sweep $sweep_id: $(
  [[ $watch_status == 0 ]] && echo done || echo "FAILED, see $state_dir/logs"))"
exit "$watch_status"
