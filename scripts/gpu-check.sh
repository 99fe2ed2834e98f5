#!/usr/bin/env bash
# The prepared device check: builds xmod-train and bench_model against the Python
# torch of the machine, then, in one run, writes one JSON summary of
#  (a) bench_model: Dense and X-MoD (K4 A1, K8 A4) training steps — tokens/s, MFU against
#      the matrix-product peak measured in the same process, peak memory, and the X-MoD /
#      Dense step-time ratio against the phi (FLOP) ratio, and the optimizer update (Muon +
#      AdamW) each step adds, timed apart;
#  (b) xmod-train: a short run that checkpoints half-way, resumed from that checkpoint, its
#      losses compared with the uninterrupted run's (and with a repeat of it, which shows the
#      run-to-run floor of non-deterministic GPU kernels);
#  (c) a 2-rank NCCL run when the machine has two GPUs (skipped otherwise).
# On CUDA: bf16, the 165M backbone at L = 4096. With --device cpu: small sizes, the same
# steps end to end (CI runs this mode).
#
#   scripts/gpu-check.sh --fetch-debs              # here, with apt: Debian's C++ deps as .debs
#   scripts/gpu-check.sh                            # on the GPU machine (default --device cuda)
#   BUILD_DIR=build/release scripts/gpu-check.sh --device cpu   # reuse a build, no building
#
# Options: --device cuda|cpu, --build-dir DIR (default build/gpu-check; a BUILD_DIR or
# --build-dir that already holds both binaries is used as it is), --debs DIR (default
# .cache/gpu-debs), --out FILE (default $OUT/gpu-check.json when $OUT is set, else
# <build dir>/gpu-check.json). Env: TOKENS (bench tokens per step), STEPS, JOBS.
#
# Machines without C++ protobuf/abseil/glog (the lent GPU machine has none and no network):
# --fetch-debs downloads Debian's packages of the libraries xmod-train and bench_model link
# into .cache/gpu-debs (ignored by git; carry it to the machine); the build unpacks them with
# dpkg -x into <build dir>/deps and points CMake there. The packages that only other parts of
# xmod need (gRPC, SQLite, Prometheus, pagmo, ...) are then stood in for by empty CMake
# targets, so that the project configures; none of their targets is built.
# Exit status: 0 when every step ran and the resumed losses met their tolerance.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DEVICE=cuda
BUILD=${BUILD_DIR:-}
REUSE=${BUILD_DIR:+1}
DEBS=.cache/gpu-debs
RESULT=""
FETCH=0
while (($#)); do
  case "$1" in
    --device) DEVICE=$2; shift 2 ;;
    --build-dir) BUILD=$2; REUSE=1; shift 2 ;;
    --debs) DEBS=$2; shift 2 ;;
    --out) RESULT=$2; shift 2 ;;
    --fetch-debs) FETCH=1; shift ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ "$DEVICE" == cuda || "$DEVICE" == cpu ]] || { echo "gpu-check: --device cuda|cpu" >&2; exit 2; }

# The Debian packages of what xmod-train and bench_model link: protobuf (and protoc),
# abseil, glog with gflags and libunwind, OpenSSL's libcrypto, CLI11, and Gloo's headers
# (LibTorch's ProcessGroupGloo.hpp includes them).
DEB_PACKAGES=(libprotobuf-dev libprotobuf32 libprotobuf-lite32 protobuf-compiler libprotoc32
  libabsl-dev libabsl20220623 libgoogle-glog-dev libgoogle-glog0v6 libgflags-dev libgflags2.2
  libunwind-dev libunwind8 libssl-dev libssl3 libcli11-dev libgloo-dev)
if ((FETCH)); then
  mkdir -p "$DEBS"
  (cd "$DEBS" && apt-get download "${DEB_PACKAGES[@]}")
  du -sh "$DEBS"
  exit 0
fi

log() { echo "gpu-check: $*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

BUILD=${BUILD:-build/gpu-check}
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
RESULT=${RESULT:-${OUT:+$OUT/gpu-check.json}}
RESULT=${RESULT:-$BUILD/gpu-check.json}
WORK="$BUILD/gpu-check"
rm -rf "$WORK"
mkdir -p "$WORK"

# ---------------------------------------------------------------------------------------
# Build.
# ---------------------------------------------------------------------------------------
# The machine's Python torch (a PyPI wheel, LibTorch in torch/lib) when it has one; else the
# project's own (.cache/torch-venv, scripts/install-libtorch.sh), found by CMake.
TORCH_ROOT=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null || true)
[[ -n "$TORCH_ROOT" && -f "$TORCH_ROOT/lib/libtorch_cpu.so" ]] || TORCH_ROOT=
CUDA_TORCH=0
[[ -n "$TORCH_ROOT" && -f "$TORCH_ROOT/lib/libtorch_cuda.so" ]] && CUDA_TORCH=1

# Empty stand-ins for the packages only other parts of xmod link (see the header).
write_stubs() {
  local dir=$1
  mkdir -p "$dir/config" "$dir/modules"
  cat >"$dir/config/gRPCConfig.cmake" <<'EOF'
add_library(gRPC::grpc++ INTERFACE IMPORTED)
add_executable(gRPC::grpc_cpp_plugin IMPORTED)
set_target_properties(gRPC::grpc_cpp_plugin PROPERTIES IMPORTED_LOCATION /bin/false)
EOF
  echo 'add_library(prometheus-cpp::core INTERFACE IMPORTED)
add_library(prometheus-cpp::pull INTERFACE IMPORTED)' >"$dir/config/prometheus-cppConfig.cmake"
  echo 'add_library(Pagmo::pagmo INTERFACE IMPORTED)' >"$dir/config/PagmoConfig.cmake"
  echo 'add_library(Eigen3::Eigen INTERFACE IMPORTED)' >"$dir/config/Eigen3Config.cmake"
  echo 'add_library(benchmark::benchmark INTERFACE IMPORTED)
add_library(benchmark::benchmark_main INTERFACE IMPORTED)' >"$dir/config/benchmarkConfig.cmake"
  echo 'add_library(SQLite::SQLite3 INTERFACE IMPORTED)
set(SQLite3_FOUND TRUE)' >"$dir/modules/FindSQLite3.cmake"
  echo 'add_library(ICU::uc INTERFACE IMPORTED)
set(ICU_FOUND TRUE)' >"$dir/modules/FindICU.cmake"
  echo 'if(NOT TARGET ZLIB::ZLIB)
  add_library(ZLIB::ZLIB INTERFACE IMPORTED)
endif()
set(ZLIB_FOUND TRUE)' >"$dir/modules/FindZLIB.cmake"
  cat >"$dir/modules/FindPkgConfig.cmake" <<'EOF'
set(PKG_CONFIG_FOUND TRUE)
function(pkg_check_modules prefix)
  add_library(PkgConfig::${prefix} INTERFACE IMPORTED)
  set(${prefix}_FOUND TRUE PARENT_SCOPE)
endfunction()
EOF
}

build() {
  local args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DXMOD_BUILD_TESTS=OFF)
  if [[ -n "$TORCH_ROOT" ]]; then
    args+=(-DXMOD_TORCH_ROOT="$TORCH_ROOT")
    ((CUDA_TORCH)) && args+=(-DXMOD_CUDA=ON -DXMOD_TRAIN_NCCL=ON)
  elif [[ "$DEVICE" == cuda ]]; then
    log "no CUDA torch: python3 -c 'import torch' fails"; return 1
  fi
  if compgen -G "$DEBS/*.deb" >/dev/null; then
    local prefix="$BUILD/deps"
    rm -rf "$prefix"
    mkdir -p "$prefix"
    for deb in "$DEBS"/*.deb; do dpkg -x "$deb" "$prefix"; done
    write_stubs "$BUILD/stubs"
    local lib="$prefix/usr/lib/x86_64-linux-gnu"
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # protoc, and later the binaries
    export PATH="$prefix/usr/bin:$PATH"
    # CMAKE_POLICY_VERSION_MINIMUM: Debian's config files declare policies from CMake 2.x,
    # which CMake 4 refuses otherwise.
    args+=(-DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DCMAKE_PREFIX_PATH="$prefix/usr" -DProtobuf_PROTOC_EXECUTABLE="$prefix/usr/bin/protoc"
      -DCMAKE_MODULE_PATH="$BUILD/stubs/modules;$prefix/usr/share/glog/cmake"
      -DgRPC_DIR="$BUILD/stubs/config" -Dprometheus-cpp_DIR="$BUILD/stubs/config"
      -DPagmo_DIR="$BUILD/stubs/config" -DEigen3_DIR="$BUILD/stubs/config"
      -Dbenchmark_DIR="$BUILD/stubs/config")
  fi
  cmake -S "$ROOT" -B "$BUILD" "${args[@]}" >"$WORK/cmake.log" 2>&1 || {
    tail -30 "$WORK/cmake.log" >&2; return 1; }
  ninja -C "$BUILD" -j "${JOBS:-$(nproc)}" xmod-train bench_model >"$WORK/ninja.log" 2>&1 || {
    grep -v '^\[' "$WORK/ninja.log" | tail -40 >&2; return 1; }
}

build_start=$(now)
if [[ -x "$BUILD/bin/xmod-train" && -x "$BUILD/bin/bench_model" && -n "$REUSE" ]]; then
  log "using the binaries in $BUILD as they are"
  built=false
else
  log "building xmod-train and bench_model in $BUILD against ${TORCH_ROOT:-the LibTorch of .cache/torch-venv}"
  if ! build; then
    mkdir -p "$(dirname "$RESULT")"
    echo "{\"device\": \"$DEVICE\", \"build\": {\"seconds\": $(since "$build_start"), \"error\": \"build failed; see $WORK/cmake.log and ninja.log\"}}" >"$RESULT"
    log "build failed"
    exit 1
  fi
  built=true
fi
BUILD_S=$(since "$build_start")
if compgen -G "$BUILD/deps/usr/lib/x86_64-linux-gnu" >/dev/null; then
  export LD_LIBRARY_PATH="$BUILD/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
BENCH="$BUILD/bin/bench_model"
TRAIN="$BUILD/bin/xmod-train"
log "build: ${BUILD_S} s"

# ---------------------------------------------------------------------------------------
# (a) bench_model.
# ---------------------------------------------------------------------------------------
run_start=$(now)
if [[ "$DEVICE" == cuda ]]; then
  BENCH_ARGS=(--device cuda:0 --precision bf16 --backbone 165M --seq_len 4096
    --tokens_per_step "${TOKENS:-32768}" --warmup 2 --steps "${STEPS:-5}" --optimizer muon)
  XMOD_CONFIGS=("4 1" "8 4")
else
  BENCH_ARGS=(--device cpu --precision fp32 --backbone cpu-d128 --seq_len 256
    --tokens_per_step "${TOKENS:-1024}" --warmup 1 --steps "${STEPS:-2}" --threads 1
    --optimizer muon)
  XMOD_CONFIGS=("4 1" "8 4")
fi
bench_files=()
for config in "${XMOD_CONFIGS[@]}"; do
  read -r k a <<<"$config"
  file="$WORK/bench-k${k}-a${a}.json"
  log "bench_model ${BENCH_ARGS[*]} --k $k --a $a"
  timeout 240 "$BENCH" "${BENCH_ARGS[@]}" --arch both --k "$k" --a "$a" --json >"$file" \
    2>"$file.log" || python3 -c 'import json, sys; print(json.dumps({"error": sys.argv[1]}))' \
    "bench_model K$k A$a failed (exit $?): $(tail -1 "$file.log")" >"$file"
  bench_files+=("$file")
done

# ---------------------------------------------------------------------------------------
# (b) xmod-train: checkpoint, resume, compare.
# ---------------------------------------------------------------------------------------
if [[ "$DEVICE" == cuda ]]; then
  T_BACKBONE=cpu-d256 T_L=512 T_BATCH=4096 T_PRECISION=bf16 T_DEVICE=cuda:0 T_THREADS=4
else
  T_BACKBONE=cpu-d64 T_L=128 T_BATCH=512 T_PRECISION=fp32 T_DEVICE=cpu T_THREADS=1
fi
T_STEPS=8 T_K=2 T_A=1
DATA="$WORK/data"
mkdir -p "$DATA"
# llm.c shards (256 int32 header: magic 20240520, version 1, count; then uint16 tokens) of
# a learnable stream: each token a fixed function of the previous one, one in eight random.
python3 - "$DATA" <<'EOF'
import random, struct, sys
rng = random.Random(5)
for name, count in (("train_000.bin", 200000), ("val_000.bin", 20000)):
    t, tokens = 1, []
    for _ in range(count):
        t = rng.randrange(2048) if rng.randrange(8) == 0 else (t * 5 + 3) % 2048
        tokens.append(t)
    with open(f"{sys.argv[1]}/{name}", "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, count, *([0] * 253)))
        f.write(struct.pack(f"<{count}H", *tokens))
EOF
tfpt=$("$BENCH" --arch plan --backbone "$T_BACKBONE" --seq_len "$T_L" --k "$T_K" --a "$T_A" |
  sed -n 's/^xmod .*train_flops_per_token=\([^ ]*\).*/\1/p')
budget=$(awk -v f="$tfpt" -v b="$T_BATCH" -v s="$T_STEPS" 'BEGIN { printf "%.6e", (s + 0.5) * f * b }')
write_spec() {  # $1 = spec file, $2 = checkpoint dir
  cat >"$1" <<EOF
model { backbone { name: "$T_BACKBONE" } arch: XMOD k: $T_K a: $T_A }
training {
  flop_budget: $budget seq_len: $T_L batch_tokens: $T_BATCH lr: 0.02 adamw_lr: 0.01
  eval_marks: 2 eval_tokens: $((4 * T_L)) seed: 5 checkpoint_every_steps: $((T_STEPS / 2))
  precision: "$T_PRECISION" log_every_steps: 1
}
data { train_glob: "$DATA/train_*.bin" val_glob: "$DATA/val_*.bin" }
checkpoint_dir: "$2"
run_id: 1
attempt: 1
EOF
}
train() {  # $1 = name, then extra flags; events to $WORK/$1.events, log to $WORK/$1.log
  local name=$1; shift
  write_spec "$WORK/$name.textpb" "$WORK/ckpt-$name"
  timeout 120 "$TRAIN" --spec "$WORK/$name.textpb" --device "$T_DEVICE" --threads "$T_THREADS" \
    --events_fd 3 "$@" 3>"$WORK/$name.events" 2>"$WORK/$name.log"
}
train_status=ok
log "xmod-train: $T_STEPS steps of X-MoD K$T_K on $T_BACKBONE, L = $T_L, $T_PRECISION, $T_DEVICE"
train whole || train_status="uninterrupted run failed: $(tail -1 "$WORK/whole.log")"
train repeat || train_status="repeated run failed: $(tail -1 "$WORK/repeat.log")"
half=$(printf '%010d' $((T_STEPS / 2)))
ckpt=$(ls "$WORK"/ckpt-whole/ckpt-a1-s"$half".pt 2>/dev/null || true)
if [[ -n "$ckpt" ]]; then
  train resumed --resume "$ckpt" || train_status="resumed run failed: $(tail -1 "$WORK/resumed.log")"
elif [[ "$train_status" == ok ]]; then
  train_status="no checkpoint at step $((T_STEPS / 2))"
fi

# ---------------------------------------------------------------------------------------
# (c) two ranks over NCCL.
# ---------------------------------------------------------------------------------------
gpus=0
[[ "$DEVICE" == cuda ]] && gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
nccl_status="skipped: $gpus GPU(s)"
[[ "$DEVICE" == cpu ]] && nccl_status="skipped: --device cpu"
if ((gpus >= 2)); then
  write_spec "$WORK/nccl.textpb" "$WORK/ckpt-nccl"
  pids=()
  for rank in 0 1; do
    timeout 180 "$TRAIN" --spec "$WORK/nccl.textpb" --device "cuda:$rank" --threads 4 \
      --backend nccl --world_size 2 --rank "$rank" --rendezvous "$WORK/nccl.store" \
      2>"$WORK/nccl-$rank.log" &
    pids+=($!)
  done
  nccl_status=ok
  for rank in 0 1; do wait "${pids[$rank]}" || nccl_status="rank $rank failed: $(tail -1 "$WORK/nccl-$rank.log")"; done
fi
RUN_S=$(since "$run_start")

# ---------------------------------------------------------------------------------------
# Summary.
# ---------------------------------------------------------------------------------------
mkdir -p "$(dirname "$RESULT")"
python3 - "$WORK" "$RESULT" "$DEVICE" "$BUILD_S" "$RUN_S" "$built" "$train_status" \
  "$nccl_status" "$T_STEPS" "${bench_files[@]}" <<'EOF'
import json, math, os, struct, sys
work, result, device, build_s, run_s, built, train_status, nccl_status, steps = sys.argv[1:10]
bench_files = sys.argv[10:]
steps = int(steps)

def varint(b, i):
    shift = value = 0
    while True:
        byte = b[i]; i += 1
        value |= (byte & 0x7F) << shift; shift += 7
        if byte < 0x80: return value, i

def fields(b):  # (field number, value) of one protobuf message, wire types 0, 1, 2, 5
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        kind = key & 7
        if kind == 0: value, i = varint(b, i)
        elif kind == 1: value = b[i:i + 8]; i += 8
        elif kind == 2:
            n, i = varint(b, i); value = b[i:i + n]; i += n
        elif kind == 5: value = b[i:i + 4]; i += 4
        else: raise ValueError(f"wire type {kind}")
        yield key >> 3, value

def metrics(name):  # {(metric, step): value} from size-delimited TrainerEvent messages
    path = os.path.join(work, name + ".events")
    out = {}
    if not os.path.exists(path): return out
    b, i = open(path, "rb").read(), 0
    while i < len(b):
        n, i = varint(b, i)
        for number, value in fields(b[i:i + n]):
            if number == 2:  # MetricPoint: step = 1, name = 4, value = 5
                p = dict(fields(value))
                out[(p.get(4, b"").decode(), p.get(1, 0))] = struct.unpack("<d", p.get(5, bytes(8)))[0]
        i += n
    return out

def compare(a, b, keys):
    diffs = [abs(a[k] - b[k]) for k in keys if k in a and k in b]
    missing = [k for k in keys if k not in a or k not in b]
    return {"compared": len(diffs), "missing": len(missing),
            "identical": not missing and all(d == 0 for d in diffs),
            "max_abs_diff": max(diffs, default=0.0)}

whole, repeat, resumed = metrics("whole"), metrics("repeat"), metrics("resumed")
LOSSES = ("train/loss", "train/aux_loss", "val/loss")
losses = sorted(k for k in whole if k[0] in LOSSES)
resume = compare(whole, resumed, [k for k in losses if k[1] > steps // 2])
floor = compare(whole, repeat, losses)
# Tolerance: bit-identical where the kernels are deterministic (CPU); on CUDA, atomics in
# backward (scatter/index_add of the routing, attention) may reorder sums, so the resumed
# losses may differ by as much as two runs from scratch do, with a relative floor of 1e-3.
loss_scale = max((abs(v) for k, v in whole.items() if k[0] == "train/loss"), default=1.0)
tolerance = 0.0 if device == "cpu" else max(2 * floor["max_abs_diff"], 1e-3 * loss_scale)
resume_ok = train_status == "ok" and resume["compared"] > 0 and resume["missing"] == 0 and \
    resume["max_abs_diff"] <= tolerance
shas = {}
for name in ("whole", "resumed"):
    d = os.path.join(work, "ckpt-" + name)
    final = sorted(f for f in os.listdir(d) if f.endswith(".pt.sha256")) if os.path.isdir(d) else []
    shas[name] = open(os.path.join(d, final[-1])).read().split()[0] if final else None

bench = []
for f in bench_files:
    try: bench.append(json.load(open(f)))
    except (ValueError, OSError) as e: bench.append({"error": f"{os.path.basename(f)}: {e}"})
targets = {}
for b in bench:
    if "results" not in b: continue
    dense = next(r for r in b["results"] if r["model"] == "dense")
    ratio = b["ratios"][0]
    name = f"xmod_K{b['k']}_A{b['a']:g}"
    if device == "cuda":
        targets[f"dense_mfu_beside_{name}"] = {"value": dense["mfu"], "target": ">= 0.35",
                                               "met": dense["mfu"] >= 0.35}
        if b["k"] == 8 and b["a"] == 4:
            targets[name + "_efficiency_ratio"] = {"value": ratio["efficiency_ratio"],
                "target": "<= 1.15", "met": ratio["efficiency_ratio"] <= 1.15}
summary = {
    "device": device,
    "build": {"seconds": float(build_s), "built": built == "true", "limit_s": 240,
              "within_limit": float(build_s) <= 240},
    "run": {"seconds": float(run_s), "limit_s": 480, "within_limit": float(run_s) <= 480},
    "bench": bench,
    "targets": targets,
    "train_resume": {"status": train_status, "steps": steps, "resumed_from_step": steps // 2,
                     "resumed_vs_uninterrupted": resume, "repeat_vs_uninterrupted": floor,
                     "tolerance_abs": tolerance, "passed": resume_ok,
                     "final_checkpoint_sha256": shas,
                     "final_checkpoints_identical": shas["whole"] is not None and shas["whole"] == shas["resumed"]},
    "nccl_2_ranks": {"status": nccl_status},
}
text = json.dumps(summary, indent=2)
open(result, "w").write(text + "\n")
print(text)
errors = [b["error"] for b in bench if "error" in b]
if errors or not resume_ok or not (nccl_status == "ok" or nccl_status.startswith("skipped")):
    sys.exit(1)
EOF
log "summary: $RESULT"
