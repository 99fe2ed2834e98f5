#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang into FUZZ_BUILD_DIR (default build/fuzz)
# and runs each for FUZZ_SECONDS (default 45) from seeds made at run time: the specs of
# examples/ as text format and as JSON, small shards and a small valid checkpoint
# (xmod-fuzz-seeds). Any crash, leak, sanitizer report, timeout (> 10 s on one input) or
# out-of-memory fails the script; the reproducer is kept under FUZZ_BUILD_DIR/artifacts.
# Reproduce with: FUZZ_BUILD_DIR/bin/<target> <artifact>. A reproducer worth keeping goes
# to fuzz/regressions/<target>/, which each run replays before it fuzzes.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FUZZ_BUILD_DIR:-build/fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-45}
# A fixed seed keeps CI's runs comparable from one submission to the next; FUZZ_SEED=0 lets
# libFuzzer pick one (to explore further by hand).
SEED=${FUZZ_SEED:-1}
JOBS=${JOBS:-$(nproc)}
TARGETS=(spec_text_fuzzer spec_json_fuzzer shard_fuzzer checkpoint_fuzzer
         checkpoint_archive_fuzzer)

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (scripts/setup.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DXMOD_BUILD_FUZZERS=ON -DXMOD_BUILD_TESTS=OFF -DXMOD_BUILD_BENCH=OFF >/dev/null
ninja -C "$BUILD_DIR" -j "$JOBS" "${TARGETS[@]}" xmod-fuzz-seeds

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts="$BUILD_DIR/artifacts"
mkdir -p "$artifacts"
# LibTorch and the other system libraries are not instrumented; their one-definition
# duplicates, and LibTorch's own leaks (fuzz/lsan.supp), are not ours to report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/fuzz/lsan.supp}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# The sweep specs among the examples (study specs, *_study.textpb, are another message).
mapfile -t sweep_specs < <(ls examples/*.textpb examples/paper/*.textpb | grep -v '_study\.textpb$')
"$BUILD_DIR/bin/xmod-fuzz-seeds" "$work/seeds" "${sweep_specs[@]}"

seeds_of() {
  case "$1" in
    spec_text_fuzzer) echo "$work/seeds/spec_text" ;;
    spec_json_fuzzer) echo "$work/seeds/spec_json" ;;
    shard_fuzzer) echo "$work/seeds/shard" ;;
    checkpoint_fuzzer) echo "$work/seeds/checkpoint" ;;
    checkpoint_archive_fuzzer) echo "" ;;
  esac
}

failed=()
for target in "${TARGETS[@]}"; do
  corpus="$work/corpus/$target"
  mkdir -p "$corpus"
  # Inputs that once crashed a target (fuzz/regressions/<target>/) run first, each once.
  if [[ -d fuzz/regressions/$target ]] &&
      ! "$BUILD_DIR/bin/$target" fuzz/regressions/"$target"/* >"$work/$target.log" 2>&1; then
    echo "fuzz: $target FAILED on a regression input; its log ends:" >&2
    tail -n 60 "$work/$target.log" >&2
    failed+=("$target")
    continue
  fi
  echo "fuzz: $target for ${SECONDS_EACH} s"
  # shellcheck disable=SC2046  # an empty seed folder is no argument
  if ! "$BUILD_DIR/bin/$target" -max_total_time="$SECONDS_EACH" -timeout=10 -seed="$SEED" \
      -rss_limit_mb=3072 -print_final_stats=1 -artifact_prefix="$artifacts/$target-" \
      "$corpus" $(seeds_of "$target") >"$work/$target.log" 2>&1; then
    echo "fuzz: $target FAILED; its log ends:" >&2
    tail -n 60 "$work/$target.log" >&2
    failed+=("$target")
  else
    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$work/$target.log" || true
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: crashes in ${failed[*]}; reproducers in $artifacts" >&2
  exit 1
fi
echo "fuzz: ${#TARGETS[@]} targets ran ${SECONDS_EACH} s each without a crash"
