#!/usr/bin/env bash
# Reproduces the adaptive-design table of docs/adaptive-design.md: for every law parameter
# set in examples/design-sim/*.json and sigma in {0.001, 0.003, 0.005}, runs xmod-design-sim
# with the B.4 grid and with the adaptive design, and prints the grid's compute and mean
# regret, the compute from which the adaptive design's mean regret stays at or below the
# grid's (from its curve), the ratio of the two, and the adaptive design's final compute and
# regret, and the calibration of its stopping claim (claims whose bound the truth's regret
# exceeded, of all claims at confident stops, against the share allowed at confidence q).
# Usage: [MARKS=N] [CONFIDENCE=Q] [TRUTH_DIR=DIR] scripts/design-sim-table.sh [BUILD_DIR] [REPS]
#   [SEED] [TOLERANCE] [SETS...]
#   defaults: build/release, 10, 1, 2e-4 (the adaptive design's stopping tolerance, nats),
#   every DIR/*.json (DIR: examples/design-sim); SETS are names such as table8 cpu-b4-fit;
#   MARKS evaluation marks per adaptive run (default 4: learning curves, early stopping and
#   resumption), CONFIDENCE the confidence of the stopping claim (default 0.9), SIGMAS the
#   noise levels (default "0.001 0.003 0.005").
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build/release}"
reps="${2:-10}"
seed="${3:-1}"
tolerance="${4:-2e-4}"
shift $(( $# < 4 ? $# : 4 ))
sets=("$@")
truth_dir="${TRUTH_DIR:-$root/examples/design-sim}"
marks="${MARKS:-4}"
confidence="${CONFIDENCE:-0.9}"
read -r -a sigmas <<< "${SIGMAS:-0.001 0.003 0.005}"
if (( ${#sets[@]} == 0 )); then
  for file in "$truth_dir"/*.json; do sets+=("$(basename "$file" .json)"); done
fi
sim="$build/bin/xmod-design-sim"
[[ -x "$sim" ]] || { echo "design-sim-table: $sim not built" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "| parameter set | sigma | grid compute (FLOPs) | grid regret | adaptive compute to reach it | ratio | adaptive final compute | adaptive final regret | K* exact grid / adaptive | claims exceeded / claims (allowed share) | early stops / resumes per rep |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for name in "${sets[@]}"; do
  truth="$truth_dir/$name.json"
  for sigma in "${sigmas[@]}"; do
    for strategy in grid adaptive; do
      "$sim" --truth "$truth" --sigma "$sigma" --strategy "$strategy" --reps "$reps" \
        --seed "$seed" --tolerance "$tolerance" --confidence "$confidence" --marks "$marks" \
        --output json > "$work/$strategy.json"
    done
    python3 - "$name" "$sigma" "$work/grid.json" "$work/adaptive.json" <<'PY'
import json, sys
name, sigma, grid_path, adaptive_path = sys.argv[1:]
grid = json.load(open(grid_path))
adaptive = json.load(open(adaptive_path))
target = grid["regret"] + 1e-12
reached = None
for point in adaptive["curve"]:
    if point["regret"] <= target:
        reached = reached if reached is not None else point["compute_flops"]
    else:
        reached = None
reach = f"{reached:.3g}" if reached is not None else "not reached"
ratio = f"{reached / grid['compute_flops']:.2f}" if reached is not None else "-"
print(f"| {name} | {sigma} | {grid['compute_flops']:.3g} | {grid['regret']:.2e} | {reach} | "
      f"{ratio} | {adaptive['compute_flops']:.3g} | {adaptive['regret']:.2e} | "
      f"{grid['k_star_exact']:.2f} / {adaptive['k_star_exact']:.2f} | "
      f"{adaptive['stop_claims_exceeded']} / {adaptive['stop_claims']} "
      f"({adaptive['allowed_share']:.2f}){'' if adaptive['calibrated'] else ' MISS'} | "
      f"{adaptive['early_stops']:.1f} / {adaptive['resumes']:.1f} |")
PY
  done
done
