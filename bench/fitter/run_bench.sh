#!/usr/bin/env bash
# The fitter's benchmark: the full two-stage fit on the 109-observation
# synthetic B.4 sweep (Table 8 parameters, sigma = 0.003), and 200 bootstrap refits, by
# xmod-fit (pagmo2 DE + exact active-set LSQ) and by SciPy (differential_evolution +
# lsq_linear, bench/fitter/scipy_fit.py) on the same CSV. Prints RMSE, wall time of each
# (best of REPEATS) and the speed ratio. SciPy's bootstrap is timed over SCIPY_BOOT refits
# and scaled to 200 (all 200 take tens of minutes).
# Usage: bench/fitter/run_bench.sh [BUILD_DIR]   (default build/fitter)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build/fitter}"
repeats="${REPEATS:-3}"
scipy_boot="${SCIPY_BOOT:-10}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$build/bin/fitter_synthetic_csv" "$work/sweep.csv" --sigma 0.003 --seed 1
field() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$1')); print(d$2)"; }
best() { sort -g | head -1; }

for i in $(seq "$repeats"); do
  "$build/bin/xmod-fit" --csv "$work/sweep.csv" --output json --no_cv --seed 1 > "$work/cpp_$i.json"
  /usr/bin/python3 "$root/bench/fitter/scipy_fit.py" "$work/sweep.csv" --seed 1 > "$work/py_$i.json"
done
cpp_fit=$(for i in $(seq "$repeats"); do field "$work/cpp_$i.json" "['fit_seconds']"; done | best)
py_fit=$(for i in $(seq "$repeats"); do field "$work/py_$i.json" "['fit_s']"; done | best)
cpp_rmse=$(field "$work/cpp_1.json" "['fit']['rmse']")
py_rmse=$(field "$work/py_1.json" "['rmse']")
cpp_evals=$(field "$work/cpp_1.json" "['evaluations']")
py_evals=$(field "$work/py_1.json" "['evaluations']")

"$build/bin/xmod-fit" --csv "$work/sweep.csv" --output json --no_cv --seed 1 \
  --bootstrap 200 --threads 1 > "$work/cpp_boot1.json"
"$build/bin/xmod-fit" --csv "$work/sweep.csv" --output json --no_cv --seed 1 \
  --bootstrap 200 --threads 2 > "$work/cpp_boot2.json"
/usr/bin/python3 "$root/bench/fitter/scipy_fit.py" "$work/sweep.csv" --seed 1 \
  --bootstrap "$scipy_boot" --bootstrap_report 200 > "$work/py_boot.json"
cpp_boot1=$(field "$work/cpp_boot1.json" "['bootstrap_seconds']")
cpp_boot2=$(field "$work/cpp_boot2.json" "['bootstrap_seconds']")
py_boot=$(field "$work/py_boot.json" "['bootstrap_s']")

/usr/bin/python3 - "$cpp_rmse" "$py_rmse" "$cpp_fit" "$py_fit" "$cpp_evals" "$py_evals" \
  "$cpp_boot1" "$cpp_boot2" "$py_boot" "$scipy_boot" <<'PY'
import sys
cr, pr, cf, pf, ce, pe, cb1, cb2, pb, n = sys.argv[1:]
cr, pr, cf, pf, cb1, cb2, pb = map(float, (cr, pr, cf, pf, cb1, cb2, pb))
print("two-stage fit, 109 observations (sigma = 0.003)")
print(f"  {'':26s} {'RMSE':>12s} {'time (s)':>10s} {'evals':>8s}")
print(f"  {'xmod-fit (pagmo2 DE)':26s} {cr:12.9f} {cf:10.4f} {ce:>8s}")
print(f"  {'SciPy DE + lsq_linear':26s} {pr:12.9f} {pf:10.4f} {pe:>8s}")
# Both reach the same optimum; "as low" allows rounding of the last digits.
print(f"  speed ratio (SciPy / xmod-fit): {pf / cf:.1f}x;  "
      f"RMSE xmod-fit <= SciPy (1e-6 relative): {cr <= pr * (1 + 1e-6)}")
print("200 bootstrap refits")
print(f"  xmod-fit, 1 thread : {cb1:9.3f} s")
print(f"  xmod-fit, 2 threads: {cb2:9.3f} s")
print(f"  SciPy (1 thread)   : {pb:9.3f} s  (measured over {n} refits, scaled to 200)")
print(f"  speed ratio (SciPy / xmod-fit 1 thread): {pb / cb1:.1f}x")
PY
