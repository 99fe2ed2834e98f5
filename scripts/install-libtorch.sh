#!/usr/bin/env bash
# Installs xmod's one LibTorch: the PyPI `torch` wheel (LibTorch 2.x; MKL and oneDNN on CPU,
# CUDA and NCCL inside) into the virtual environment .cache/torch-venv (Debian's
# /usr/bin/python3), where cmake/XmodTorch.cmake finds it. Idempotent and quick when present.
#
#   scripts/install-libtorch.sh          # CPU: the wheel and the two CUDA libraries its CPU
#                                        # library names as NEEDED (~540 MB download)
#   scripts/install-libtorch.sh --cuda   # GPU builds (-DXMOD_CUDA=ON) and Python `import
#                                        # torch`: the wheel with its dependencies but Triton,
#                                        # and nvcc for the CUDA kernels (~2.6 GB download,
#                                        # 4.5 GB installed)
#
# Why the CPU set-up is enough (docs/gpu-training.md, "One LibTorch"): a CPU build links only
# libtorch_cpu.so and libc10.so; their NEEDED libraries are the wheel's own plus
# libcudart.so.13 and libcupti.so.13 (the profiler's), found through libtorch_cpu's RPATH in
# the nvidia/cu13 wheels. So the wheel goes in without its dependencies, then the CUDA
# toolkit meta-package with only the cudart and cupti extras, at the version the wheel pins.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSION=${XMOD_TORCH_VERSION:-2.15.0}
VENV=.cache/torch-venv
CUDA=0
case "${1:-}" in
  "") ;;
  --cuda) CUDA=1 ;;
  *) echo "install-libtorch: unknown argument $1 (only --cuda)" >&2; exit 2 ;;
esac
PIP=("$VENV/bin/pip" install --quiet --disable-pip-version-check)
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)

have_torch() {
  [[ -n "$SITE" && -f "$SITE/torch/lib/libtorch_cpu.so" ]] &&
    grep -qx "Version: $TORCH_VERSION" "$SITE/torch-$TORCH_VERSION.dist-info/METADATA" 2>/dev/null
}
if ! have_torch; then
  echo "install-libtorch: torch==$TORCH_VERSION into $VENV"
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV"
  SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "${PIP[@]}" --no-deps "torch==$TORCH_VERSION"
fi
if ((CUDA)); then
  # Everything the wheel depends on; and the CUDA C runtime headers of the runtime's own minor
  # version (crt/host_config.h), which ProcessGroupNCCL.hpp includes through cuda_runtime.h.
  # Triton (1 GB) is left out: it serves only Python's torch.compile, which nothing here runs;
  # `import torch` works without it.
  if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
    mapfile -t DEPS < <(sed -n 's/^Requires-Dist: //p' \
      "$SITE/torch-$TORCH_VERSION.dist-info/METADATA" | grep -v -e '^triton' -e 'extra ==')
    "${PIP[@]}" --no-warn-conflicts "${DEPS[@]}"
  fi
  CUDA_RUNTIME=$("$VENV/bin/pip" show nvidia-cuda-runtime | sed -n 's/^Version: \([0-9]*\.[0-9]*\).*/\1/p')
  if ! "$VENV/bin/pip" show nvidia-cuda-crt >/dev/null 2>&1; then
    "${PIP[@]}" "nvidia-cuda-crt==$CUDA_RUNTIME.*"
  fi
  # nvcc for xmod's CUDA kernels (model/cuda, -DXMOD_CUDA_KERNELS): the toolkit meta-package's
  # nvcc extra (nvcc, NVVM, the crt headers) at the version the wheel pins, ~100 MB.
  if ! compgen -G "$SITE/nvidia/cu*/bin/nvcc" >/dev/null; then
    CUDA_TOOLKIT=$(sed -n 's/^Requires-Dist: cuda-toolkit\[.*\]==\([0-9.]*\).*/\1/p' \
      "$SITE/torch-$TORCH_VERSION.dist-info/METADATA")
    "${PIP[@]}" --no-warn-conflicts "cuda-toolkit[nvcc]==$CUDA_TOOLKIT"
  fi
elif ! compgen -G "$SITE/nvidia/cu*/lib/libcupti.so.*" >/dev/null ||
     ! compgen -G "$SITE/nvidia/cu*/lib/libcudart.so.*" >/dev/null; then
  # The CUDA toolkit version the wheel pins: "cuda-toolkit[cublas,...]==13.2.2; ...".
  CUDA_TOOLKIT=$(sed -n 's/^Requires-Dist: cuda-toolkit\[.*\]==\([0-9.]*\).*/\1/p' \
    "$SITE/torch-$TORCH_VERSION.dist-info/METADATA")
  [[ -n "$CUDA_TOOLKIT" ]] || { echo "install-libtorch: no cuda-toolkit pin in the wheel" >&2; exit 1; }
  # --no-warn-conflicts: the rest of torch's dependencies are left out on purpose.
  "${PIP[@]}" --no-warn-conflicts "cuda-toolkit[cudart,cupti]==$CUDA_TOOLKIT"
fi
echo "install-libtorch: $SITE/torch (LibTorch $TORCH_VERSION$( ((CUDA)) && echo ", CUDA"))"
