#!/usr/bin/env bash
# Builds the LibTorch parts of xmod — model/, xmod-train, bench_model and their tests —
# against LibTorch 2.x from the PyPI `torch` wheel (a CUDA build with NCCL inside), with the
# NCCL path compiled in (-DXMOD_TRAIN_NCCL=ON), into build/torch2 (or BUILD_DIR). The wheel
# goes into a virtual environment under .cache/ (Debian's /usr/bin/python3). Everything else
# (gRPC, protobuf, abseil, ...) comes from Debian as in the default build (scripts/setup.sh).
# Runs on a machine without a GPU: the CUDA code is compiled and linked, and runs on CPU.
#
#   scripts/build-torch2.sh            # build
#   scripts/build-torch2.sh --test     # build, then run the model and trainer tests on CPU
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so clones in other folders share hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
TORCH_VERSION=${XMOD_TORCH_VERSION:-2.15.0}
VENV=${XMOD_TORCH2_VENV:-.cache/torch2-venv}
BUILD_DIR=${BUILD_DIR:-build/torch2}
TARGETS=(xmod-train bench_model model_test train_core_test train_optim_test trainer_test
         train_process_test distributed_test)

scripts/setup.sh
if ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed"; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv
fi
if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  echo "build-torch2: installing torch==$TORCH_VERSION into $VENV"
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "torch==$TORCH_VERSION"
fi
# ProcessGroupNCCL.hpp includes the CUDA runtime headers, which include crt/host_config.h:
# the CUDA C runtime headers of the runtime's own minor version (headers only, no nvcc).
CUDA_RUNTIME=$("$VENV/bin/pip" show nvidia-cuda-runtime 2>/dev/null | sed -n 's/^Version: \([0-9]*\.[0-9]*\).*/\1/p')
if [[ -n "$CUDA_RUNTIME" ]] && ! "$VENV/bin/pip" show nvidia-cuda-crt >/dev/null 2>&1; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "nvidia-cuda-crt==$CUDA_RUNTIME.*"
fi
TORCH_ROOT=$("$VENV/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')

start=$(date +%s)
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DXMOD_TORCH_ROOT="$TORCH_ROOT" -DXMOD_TRAIN_NCCL=ON >/dev/null
ninja -C "$BUILD_DIR" -j "${JOBS:-$(nproc)}" "${TARGETS[@]}"
echo "build-torch2: built in $(( $(date +%s) - start )) s against $TORCH_ROOT"
ldd "$BUILD_DIR/bin/xmod-train" | grep -E "libtorch_cuda|libnccl" || {
  echo "build-torch2: xmod-train does not link libtorch_cuda and libnccl" >&2
  exit 1
}

if [[ "${1:-}" == "--test" ]]; then
  cd "$BUILD_DIR"
  ctest --output-on-failure --timeout 900 -j "${CTEST_JOBS:-2}" \
    -R '^(model_test|train_core_test|train_optim_test|trainer_test|train_process_test|distributed_test)$'
fi
