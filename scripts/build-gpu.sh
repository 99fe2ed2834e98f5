#!/usr/bin/env bash
# The GPU build: the LibTorch parts of xmod — model/, xmod-train, bench_model and their tests —
# linked with LibTorch's CUDA libraries, the NCCL path compiled in and xmod's CUDA kernels
# compiled by the wheel's nvcc (-DXMOD_CUDA=ON -DXMOD_TRAIN_NCCL=ON), into build/gpu (or
# BUILD_DIR). Same wheel as every build
# (.cache/torch-venv), here with all its CUDA dependencies (scripts/install-libtorch.sh --cuda).
# Runs on a machine without a GPU: the CUDA code is compiled and linked, and runs on CPU.
#
#   scripts/build-gpu.sh            # build
#   scripts/build-gpu.sh --test     # build, then run the model and trainer tests on CPU
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so clones in other folders share hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
BUILD_DIR=${BUILD_DIR:-build/gpu}
TARGETS=(xmod-train bench_model model_test model_device_test cuda_kernels_test train_core_test
         train_optim_test trainer_test train_step_test train_process_test distributed_test)

scripts/setup.sh
scripts/install-libtorch.sh --cuda

start=$(date +%s)
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DXMOD_CUDA=ON -DXMOD_TRAIN_NCCL=ON >/dev/null
ninja -C "$BUILD_DIR" -j "${JOBS:-$(nproc)}" "${TARGETS[@]}"
echo "build-gpu: built in $(( $(date +%s) - start )) s"
ldd "$BUILD_DIR/bin/xmod-train" | grep -E "libtorch_cuda|libnccl" || {
  echo "build-gpu: xmod-train does not link libtorch_cuda and libnccl" >&2
  exit 1
}

if [[ "${1:-}" == "--test" ]]; then
  cd "$BUILD_DIR"
  ctest --output-on-failure --timeout 900 -j "${CTEST_JOBS:-2}" \
    -R '^(model_test|model_device_test|cuda_kernels_test|train_core_test|train_optim_test|trainer_test|train_step_test|train_process_test|distributed_test)$'
fi
