#!/bin/bash
# Runs bench_model (xmod, LibTorch C++) and eager_models.py (PyTorch eager, the same LibTorch:
# the torch of .cache/torch-venv, which `import torch` needs with all its dependencies —
# scripts/install-libtorch.sh --cuda) side by side at the same thread budget, for each L and thread count, and prints tokens/s of
# each, xmod's efficiency ratio (step-time ratio / FLOP ratio, must be <= 1.0) and the
# speed-up of xmod over eager (target >= 1.3).
#
# Usage: bench/model/run_bench.sh [BUILD_DIR] — env: LS="1024 4096", THREADS="1 2", K=4, A=1,
# N0=-1 (default 4), STEPS=3, WARMUP=1, TOKENS=4096, OMP_WAIT_POLICY (default libgomp's).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build/release}"
python="$here/../../.cache/torch-venv/bin/python"
"$python" -c "import torch" 2>/dev/null ||
  { echo "eager twins: $python cannot import torch; run scripts/install-libtorch.sh --cuda" >&2; exit 2; }
bench="$build/bin/bench_model"
[[ -x "$bench" ]] || { echo "no $bench: build the bench_model target first" >&2; exit 2; }
LS="${LS:-1024 4096}"; THREADS="${THREADS:-1 2}"; K="${K:-4}"; A="${A:-1}"; N0="${N0:--1}"
STEPS="${STEPS:-3}"; WARMUP="${WARMUP:-1}"; TOKENS="${TOKENS:-4096}"

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

for threads in $THREADS; do
  export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
  for L in $LS; do
    common=(--seq_len "$L" --tokens_per_step "$TOKENS" --k "$K" --a "$A" --n0 "$N0"
            --threads "$threads" --steps "$STEPS" --warmup "$WARMUP")
    ours="$("$bench" "${common[@]}" --arch both)"
    echo "$ours"
    plans="$("$bench" --seq_len "$L" --k "$K" --a "$A" --n0 "$N0" --arch plan)"
    declare -A eager_tps=()
    for name in dense xmod; do
      line="$(grep "^$name " <<<"$plans")"
      out="$("$python" "$here/eager_models.py" --name "$name" --seq_len "$L" \
        --tokens_per_step "$TOKENS" --k "$K" --threads "$threads" --steps "$STEPS" \
        --warmup "$WARMUP" \
        --plan "$(field plan "$line")" --intervals="$(field intervals "$line")" \
        --train_flops_per_token "$(field train_flops_per_token "$line")" \
        $(for key in d heads kv_heads head_dim ffn vocab n_layers rope_theta qk_norm; do
            echo "--$key $(field "$key" "$line")"; done))"
      echo "$out"
      eager_tps[$name]="$(field tokens_per_s "$out")"
    done
    for name in dense xmod; do
      ours_tps="$(field tokens_per_s "$(grep "^model=$name " <<<"$ours")")"
      awk -v n="$name" -v L="$L" -v t="$threads" -v a="$ours_tps" -v b="${eager_tps[$name]}" \
        'BEGIN { printf "speedup model=%s L=%s threads=%s ours_tokens_per_s=%.1f eager_tokens_per_s=%.1f ours_over_eager=%.3f (target >= 1.3)\n", n, L, t, a, b, a / b }'
    done
    unset eager_tps
  done
done
